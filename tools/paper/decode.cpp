// `linea paper decode`: Figure 5 — the time to process a 5-token prompt and decode up to a total
// length N, and the peak memory, for ReGLA (R), Fast Decay (F) and softmax attention with a KV
// cache (S), 6 layers each, N = 2^6 .. 2^13 as in the paper (small; the standard shape of
// `linea bench decode`, on the run's device), or N = 2^4 .. 2^7 with a narrow model (tiny, CI's
// smoke test). Each point is one call of generate(), greedy, exactly as `linea generate` decodes
// (on CUDA the step replayed from a CUDA graph where the state allows, the capture included in the
// time); weights are random, which changes neither the work nor the memory.
#include <chrono>
#include <cmath>
#include <string>

#include "nn/model.h"
#include "tools/bench_util.h"
#include "tools/paper/experiment.h"
#include "train/generate.h"

namespace linea::cli::paper {

namespace {

struct Letter {
  char letter;
  const char* name;
  plot::Color color;
};
constexpr Letter kLetters[] = {{'R', "ReGLA", kBlue}, {'F', "Fast Decay", kOrange}, {'S', "softmax (KV cache)", kGreen}};
constexpr int64_t kPromptLength = 5;  // the paper's

nn::ModelConfig model_config(const PaperRun& run, char letter) {
  nn::ModelConfig c;
  c.vocab_size = run.pick<int64_t>(256, 8192);
  c.d_model = run.pick<int64_t>(32, 512);
  c.heads = run.pick<int64_t>(2, 8);
  c.pattern = std::string(6, letter);
  c.mlp = nn::MlpKind::GeluTanh;
  c.mlp_hidden = 4 * c.d_model;
  return c;
}

struct Point {
  double ms = 0, peak_mib = 0;
};

// One generate() call to total length n: its wall time and the peak memory over it.
Point measure(nn::LanguageModel& model, const std::vector<int64_t>& prompt, int64_t n, Device device) {
  const train::SampleOptions options{.tokens = n - kPromptLength, .temperature = 0.0};
  bench::reset_peak_memory(device);
  const auto start = std::chrono::steady_clock::now();
  train::generate(model, prompt, options, device);  // returns host ids: the device is done
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return {ms, bench::peak_memory_mib(device)};
}

void run_decode(const PaperRun& run, Report& report) {
  const Device device = Device::parse(run.device);
  const int64_t first_log2 = run.pick<int64_t>(4, 6), last_log2 = run.pick<int64_t>(7, 13);
  const nn::ModelConfig shape = model_config(run, 'R');
  report.heading("Figure 5: prompt processing + decoding time and peak memory against the sequence length");
  report.paragraph("6 layers of each mixer, d_model " + std::to_string(shape.d_model) + ", " +
                   std::to_string(shape.heads) + " heads, vocabulary " + std::to_string(shape.vocab_size) +
                   ", random weights, on " + device.str() + ". A prompt of " + std::to_string(kPromptLength) +
                   " tokens is processed in one parallel pass, then greedy decoding runs to a total length N (one "
                   "generate() call per point, timed whole; peak memory: " +
                   (device.is_cuda() ? "the caching allocator's peak in use" : "the process's peak resident set") +
                   "). The paper (Nvidia V100, its Figure 5) shows the curves without numbers: softmax attention's "
                   "memory and time grow with N while ReGLA and Fast Decay overlap, flat in memory.");

  std::vector<std::string> header = {"N"};
  for (const Letter& l : kLetters) {
    header.push_back(std::string(l.name) + " ms");
    header.push_back(std::string(l.name) + " peak MiB");
  }
  MarkdownTable table(header);
  std::vector<std::vector<Point>> points(std::size(kLetters));
  json::Value letters = json::Value::object();
  for (size_t i = 0; i < std::size(kLetters); ++i) {
    Generator init(run.seed + 1), data(run.seed + 2);
    nn::LanguageModel model(model_config(run, kLetters[i].letter), init);
    model.to(device);
    model.eval();
    std::vector<int64_t> prompt;
    for (int64_t t = 0; t < kPromptLength; ++t)
      prompt.push_back(static_cast<int64_t>(randint(0, shape.vocab_size, {1}, kCPU, &data).item()));
    measure(model, prompt, int64_t{1} << first_log2, device);  // warm-up: libraries, the allocator's pools
    json::Value rows = json::Value::array();
    for (int64_t p = first_log2; p <= last_log2; ++p) {
      const Point point = measure(model, prompt, int64_t{1} << p, device);
      points[i].push_back(point);
      rows.push_back({{"n", int64_t{1} << p}, {"ms", point.ms}, {"peak_mib", point.peak_mib}});
    }
    letters[std::string(1, kLetters[i].letter)] = {{"name", kLetters[i].name}, {"points", rows}};
  }
  for (int64_t p = first_log2; p <= last_log2; ++p) {
    std::vector<std::string> row = {std::to_string(int64_t{1} << p)};
    for (const auto& series : points) {
      row.push_back(format_number(series[p - first_log2].ms, 4));
      row.push_back(format_number(series[p - first_log2].peak_mib, 4));
    }
    table.add_row(row);
  }
  report.table(table);

  // What the paper's figure says, measured: ReGLA against Fast Decay, and softmax's growth.
  const Point regla = points[0].back(), fast = points[1].back(), softmax = points[2].back();
  const Point softmax_first = points[2].front(), regla_first = points[0].front();
  const int64_t n_last = int64_t{1} << last_log2;
  report.paragraph("At N = " + std::to_string(n_last) + ": ReGLA takes " + format_number(regla.ms / fast.ms, 3) +
                   "x Fast Decay's time and " + format_number(regla.peak_mib / fast.peak_mib, 3) +
                   "x its peak memory; softmax attention " + format_number(softmax.ms / regla.ms, 3) +
                   "x ReGLA's time and " + format_number(softmax.peak_mib / regla.peak_mib, 3) +
                   "x its memory. From N = " + std::to_string(int64_t{1} << first_log2) + " to " +
                   std::to_string(n_last) + ", softmax's peak memory grows by " +
                   format_number(softmax.peak_mib - softmax_first.peak_mib, 4) + " MiB, ReGLA's by " +
                   format_number(regla.peak_mib - regla_first.peak_mib, 4) + " MiB.");
  report.json()["decode"] = {{"device", device.str()}, {"prompt", kPromptLength}, {"letters", letters},
                             {"regla_over_fast_decay_time", regla.ms / fast.ms},
                             {"softmax_over_regla_time", softmax.ms / regla.ms},
                             {"softmax_over_regla_memory", softmax.peak_mib / regla.peak_mib}};

  for (const bool memory : {false, true}) {
    std::vector<plot::Series> series;
    std::vector<plot::LegendEntry> legend;
    for (size_t i = 0; i < std::size(kLetters); ++i) {
      std::vector<plot::Point> line;
      for (int64_t p = first_log2; p <= last_log2; ++p) {
        const Point& point = points[i][p - first_log2];
        line.push_back({static_cast<double>(p), memory ? point.peak_mib : point.ms});
      }
      series.push_back({.points = line, .color = kLetters[i].color, .line_width = 3, .marker_radius = 5});
      legend.push_back({kLetters[i].name, kLetters[i].color, 3, 5});
    }
    plot::ChartSpec chart{.title = memory ? "Figure 5: peak memory" : "Figure 5: prompt + decoding time",
                          .x_title = "log2 of the sequence length N",
                          .y_title = memory ? "peak memory (MiB)" : "time (ms)", .log_y = !memory,
                          .series = series, .legend = legend};
    report.figure(memory ? "decode_figure5_memory.png" : "decode_figure5_time.png", chart,
                  memory ? "Peak memory against N: the recurrent states are flat, the KV cache grows."
                         : "Prompt processing + decoding time against N (log scale).");
  }
}

}  // namespace

Experiment decode_experiment() {
  return {"decode", "Figure 5: prompt + decoding time and peak memory against the length (R, F, S)", run_decode};
}

}  // namespace linea::cli::paper
