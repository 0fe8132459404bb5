#include "tools/bench_util.h"

#include <cblas.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "cuda/memory.h"
#include "tensor/error.h"
#include "tools/flags.h"

namespace linea::cli::bench {

namespace {

double time_ms(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double median(std::vector<double> values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  return 0.5 * (values[mid] + *std::max_element(values.begin(), values.begin() + mid));
}

double median_ms(int repeats, const std::function<void()>& fn, int warmup) {
  return median_ms_with_setup(repeats, [] {}, fn, warmup);
}

double median_ms_with_setup(int repeats, const std::function<void()>& setup, const std::function<void()>& fn,
                            int warmup) {
  for (int i = 0; i < warmup; ++i) setup(), fn();
  std::vector<double> times;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    setup();
    times.push_back(time_ms(fn));
  }
  return median(times);
}

std::pair<double, double> median_ms_pair(int repeats, const std::function<void()>& a, const std::function<void()>& b,
                                         int warmup) {
  for (int i = 0; i < warmup; ++i) a(), b();
  std::vector<double> times_a, times_b;
  // The order alternates too: whichever runs second finds the caches warmed by the first.
  for (int i = 0; i < std::max(1, repeats); ++i) {
    if (i % 2 == 0) {
      times_a.push_back(time_ms(a));
      times_b.push_back(time_ms(b));
    } else {
      times_b.push_back(time_ms(b));
      times_a.push_back(time_ms(a));
    }
  }
  return {median(times_a), median(times_b)};
}

void reset_peak_memory(Device device) {
  if (device.is_cuda()) {
    cuda::reset_peak(device.index);
    return;
  }
#ifdef __GLIBC__
  // Freed blocks stay in malloc's heap, resident, unless handed back; without this the reading
  // would be the largest heap so far, not what the measured work needs.
  malloc_trim(0);
#endif
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // "reset the peak resident set size" (proc(5)); fails quietly where unsupported
}

double peak_memory_mib(Device device) {
  if (device.is_cuda()) return static_cast<double>(cuda::memory_stats(device.index).peak) / (1 << 20);
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;  // "VmHWM: 123 kB"
  return std::nan("");
}

JsonLine& JsonLine::add(const std::string& key, double value) {
  // A timing carries no more than six significant digits; rounded to them, the double prints
  // with no more either. nlohmann writes NaN and infinities as null.
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return set(key, std::strtod(text, nullptr));
}

JsonLinesOut::JsonLinesOut(const std::string& path) {
  if (path.empty()) return;
  file_.open(path);
  LINEA_CHECK(file_.is_open(), "bench", "cannot open '", path, "' for writing");
}

void JsonLinesOut::write(const JsonLine& line) {
  std::cout << line.str() << std::endl;  // flushed: a long run shows its lines as they come
  if (file_.is_open()) file_ << line.str() << std::endl;
}

void add_timing_flags(Flags& flags, TimingOptions& options) {
  flags.add("repeats", &options.repeats, "timed runs per measurement; the median is reported");
  flags.add("threads", &options.threads, "threads of linea's kernels and of OpenBLAS (LINEA_NUM_THREADS, else all cores)");
  flags.add("out", &options.out, "also write the JSON lines to this file");
}

bool parse(Flags& flags, std::span<const std::string> args, const TimingOptions& options) {
  if (!flags.parse(args)) return false;
  if (options.repeats < 1) flags.fail("--repeats must be at least 1");
  if (options.threads < 1) flags.fail("--threads must be at least 1");
  return true;
}

ThreadsForBench::ThreadsForBench(int threads) : ScopedSetting(threads) { openblas_set_num_threads(threads); }

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    items.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

void ListFlag::add_to(Flags& flags, std::string name, const std::string& help) {
  name_ = std::move(name);
  flags.add(name_, &text_, help);
}

std::vector<std::string> ListFlag::items() const { return split_list(text_); }

std::vector<int64_t> ListFlag::positive_numbers(const Flags& flags) const {
  std::vector<int64_t> values;
  for (const std::string& item : items()) {
    size_t used = 0;
    int64_t value = 0;
    try {
      value = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || value < 1) fail(flags, "positive whole numbers separated by commas", text_);
    values.push_back(value);
  }
  return values;
}

void ListFlag::fail(const Flags& flags, const std::string& takes, const std::string& got) const {
  flags.fail("--" + name_ + " takes " + takes + ", got '" + got + "'");
}

void add_lm_size_flags(Flags& flags, LmSize& size, const LmSizeHelp& help) {
  flags.add("vocab", &size.vocab, help.vocab);
  flags.add("d-model", &size.d_model, help.d_model);
  flags.add("layers", &size.layers, help.layers);
  flags.add("heads", &size.heads, help.heads);
}

nn::ModelConfig lm_config(const LmSize& size, char letter) {
  nn::ModelConfig config;
  config.vocab_size = size.vocab;
  config.d_model = size.d_model;
  config.heads = size.heads;
  config.pattern = std::string(static_cast<size_t>(size.layers), letter);
  config.mlp = nn::MlpKind::GeluTanh;
  return config;
}

JsonLine& add_lm_size(JsonLine& line, const LmSize& size) {
  return line.add("V", size.vocab).add("d", size.d_model).add("L", size.layers).add("H", size.heads);
}

}  // namespace linea::cli::bench
