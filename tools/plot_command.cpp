// `linea plot RUN_DIR... --out FILE.png`: the training and validation curves of one or more runs
// in one PNG, one color per run, so runs can be compared by eye.
#include <algorithm>
#include <iterator>
#include <cstdio>
#include <string>
#include <vector>

#include "tensor/error.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/plot/chart.h"
#include "tools/plot/curves.h"
#include "tools/plot/png_writer.h"
#include "tools/plot/run_log.h"

namespace linea::cli {

namespace {

using namespace linea::plot;

// Colors that stay apart on white and for the common kinds of color blindness (after Okabe and
// Ito's palette, with its yellow darkened to read on white); runs beyond eight reuse them.
constexpr Color kPalette[] = {{0, 114, 178},  {213, 94, 0},   {0, 158, 115}, {204, 121, 167},
                              {230, 159, 0},  {86, 180, 233}, {60, 60, 60},  {170, 150, 20}};
constexpr Color kKeyGray{110, 110, 110};

struct PlotConfig {
  std::vector<std::string> runs;
  std::string out = "plot.png";
  std::string x = "step";
  std::string metric = "loss";
  std::string split = "valid";
  int smooth = 0;
  std::string title;
  int width = 1000, height = 600;
  bool log_y = false;
};

// The two names the user sees for a run must differ: "runs/a/seed1" and "runs/b/seed1" are both
// named "seed1" by their directory, so such runs are named by the path as given instead.
void disambiguate_names(std::vector<RunLog>& logs, const std::vector<std::string>& paths) {
  for (size_t i = 0; i < logs.size(); ++i)
    for (size_t j = 0; j < logs.size(); ++j)
      if (i != j && logs[i].name == logs[j].name) {
        logs[i].name = paths[i];
        break;
      }
}

std::string x_title(XQuantity x, const TimeUnit& unit) {
  if (x == XQuantity::Tokens) return "tokens";
  if (x == XQuantity::Time) return std::string("time (") + unit.name + ")";
  return "step";
}

Color run_color(size_t i) { return kPalette[i % std::size(kPalette)]; }

// One moving-average window for all runs, so their curves are smoothed alike: under --smooth 0,
// the automatic window of the longest run.
int smoothing_window(const PlotConfig& cfg, const std::vector<RunLog>& logs) {
  if (cfg.smooth > 0) return cfg.smooth;
  int window = 1;
  for (const RunLog& log : logs) window = std::max(window, auto_smooth_window(log.steps.size()));
  return window;
}

// The chart of the runs' curves: per run a faint raw curve (when smoothed), the training curve
// and the validation curve with markers, in the run's color; a legend naming the runs and then
// the two line styles.
ChartSpec chart_spec(const PlotConfig& cfg, const CurveOptions& options, const std::vector<RunLog>& logs,
                     std::vector<RunCurves> curves) {
  double max_x = 0;
  for (const RunCurves& c : curves)
    for (const std::vector<Point>* points : {&c.train, &c.valid})
      for (const Point& p : *points) max_x = std::max(max_x, p.x);
  const TimeUnit unit = time_unit(options.x == XQuantity::Time ? max_x : 0);
  for (RunCurves& c : curves)
    for (std::vector<Point>* points : {&c.train, &c.train_raw, &c.valid})
      for (Point& p : *points) p.x /= options.x == XQuantity::Time ? unit.seconds : 1;

  ChartSpec spec;
  spec.width = cfg.width;
  spec.height = cfg.height;
  spec.log_y = cfg.log_y;
  const std::string metric_name = options.metric == Metric::Loss ? "loss" : "perplexity";
  spec.title = cfg.title.empty() ? "Training and validation " + metric_name : cfg.title;
  spec.x_title = x_title(options.x, unit);
  spec.y_title = metric_name + (cfg.log_y ? " (log scale)" : "");
  // Sizes in proportion to the text, so a larger image keeps the same look.
  const double s = (chart_scale(cfg.width, cfg.height) + 1) / 3.0;
  const double train_w = 1.5 * s, valid_w = 2.5 * s, marker = 3.5 * s;
  // Raw curves first, then the smoothed ones, then validation: what matters most lies on top.
  for (size_t i = 0; i < logs.size(); ++i) spec.series.push_back({curves[i].train_raw, run_color(i), train_w, 0, 0.22});
  for (size_t i = 0; i < logs.size(); ++i) spec.series.push_back({curves[i].train, run_color(i), train_w, 0, 1});
  for (size_t i = 0; i < logs.size(); ++i) spec.series.push_back({curves[i].valid, run_color(i), valid_w, marker, 1});

  for (size_t i = 0; i < logs.size(); ++i) spec.legend.push_back({logs[i].name, run_color(i), valid_w, 0});
  spec.legend.push_back({});  // a gap before the key to the line styles
  const std::string train = options.smooth > 1 ? "train (avg of " + std::to_string(options.smooth) + ")" : "train";
  spec.legend.push_back({train, kKeyGray, train_w, 0});
  spec.legend.push_back({options.split, kKeyGray, valid_w, marker});
  return spec;
}

int run(const std::string& program, std::span<const std::string> args) {
  PlotConfig cfg;
  Flags flags(program,
              "Draws the training curve (thin) and the validation curve (thick, with markers) of each run\n"
              "into a PNG, one color per run, named by its directory in the legend. A run directory holds\n"
              "the trainer's log.jsonl (a .jsonl file may also be given directly). The training curve is\n"
              "a centered moving average of the logged steps, drawn over the raw curve in a faint tone;\n"
              "the automatic window (--smooth 0) is about 1/50 of the points of the longest run.");
  flags.add("out", &cfg.out, "PNG file to write");
  flags.add_choice("x", &cfg.x, {"step", "tokens", "time"}, "quantity on the x axis");
  flags.add_choice("metric", &cfg.metric, {"loss", "ppl"}, "quantity on the y axis (ppl: perplexity, exp(loss))");
  flags.add("split", &cfg.split, "eval split drawn as the validation curve");
  flags.add("smooth", &cfg.smooth, "training curve's moving-average window (1: none, 0: automatic)");
  flags.add("title", &cfg.title, "chart title; empty: one naming the metric");
  flags.add("width", &cfg.width, "image width in pixels");
  flags.add("height", &cfg.height, "image height in pixels");
  flags.add("log-y", &cfg.log_y, "logarithmic y axis");
  flags.add_rest("RUN_DIR", &cfg.runs, "run directories to compare (at least one)");
  if (!flags.parse(args)) return 0;
  if (cfg.runs.empty()) flags.fail("give at least one run directory");
  if (cfg.smooth < 0) flags.fail("--smooth must be 0 (automatic) or a window of 1 or more points");
  if (cfg.width < 300 || cfg.height < 200 || cfg.width > 10000 || cfg.height > 10000)
    flags.fail("--width and --height must be within 300x200 .. 10000x10000");
  // Checked before the work, so a build without libpng says so at once.
  if (!png_supported()) fail("plot", "built without libpng; install libpng-dev and rebuild");

  std::vector<RunLog> logs;
  for (const std::string& run_dir : cfg.runs) {
    logs.push_back(read_run_log(run_dir));
    if (logs.back().unfinished_line > 0)
      std::fprintf(stderr, "linea plot: %s, line %lld is unfinished (a run still writing it?); left out\n",
                   logs.back().path.c_str(), static_cast<long long>(logs.back().unfinished_line));
  }
  disambiguate_names(logs, cfg.runs);

  CurveOptions options;
  options.x = cfg.x == "tokens" ? XQuantity::Tokens : cfg.x == "time" ? XQuantity::Time : XQuantity::Step;
  options.metric = cfg.metric == "ppl" ? Metric::Perplexity : Metric::Loss;
  options.split = cfg.split;
  options.smooth = smoothing_window(cfg, logs);
  std::vector<RunCurves> curves;
  size_t valid_points = 0;
  for (const RunLog& log : logs) {
    curves.push_back(run_curves(log, options));
    valid_points += curves.back().valid.size();
  }

  write_png(cfg.out, render_chart(chart_spec(cfg, options, logs, std::move(curves))));
  std::printf("wrote %s (%dx%d): %zu run%s, %zu %s points\n", cfg.out.c_str(), cfg.width, cfg.height, logs.size(),
              logs.size() == 1 ? "" : "s", valid_points, cfg.split.c_str());
  return 0;
}

}  // namespace

Command plot_command() { return {"plot", "draw the loss curves of training runs to a PNG", run}; }

}  // namespace linea::cli
