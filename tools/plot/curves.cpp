#include "tools/plot/curves.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"

namespace linea::plot {

namespace {

const char* field_name(XQuantity x) { return x == XQuantity::Tokens ? "tokens" : "time_s"; }

double step_x(const StepRecord& r, XQuantity x, const std::string& path) {
  if (x == XQuantity::Step) return static_cast<double>(r.step);
  const double v = x == XQuantity::Tokens ? r.tokens : r.time_s;
  LINEA_CHECK(std::isfinite(v), "plot", path, ", line ", r.line, ": the step record has no '", field_name(x),
              "' to plot against");
  return v;
}

// The x of an eval at `step`, from the step records' (step, x) pairs: linear between the two
// around it, extended along the nearest two beyond them (tokens grow linearly with steps).
double interpolated_x(const std::vector<Point>& step_to_x, int64_t step) {
  const double s = static_cast<double>(step);
  if (step_to_x.size() == 1) return step_to_x[0].y;
  auto upper = std::lower_bound(step_to_x.begin(), step_to_x.end(), s, [](Point p, double v) { return p.x < v; });
  if (upper == step_to_x.begin()) ++upper;
  if (upper == step_to_x.end()) --upper;
  const Point a = *(upper - 1), b = *upper;
  return a.y + (b.y - a.y) * (s - a.x) / (b.x - a.x);
}

double metric_of(double loss, Metric metric) { return metric == Metric::Loss ? loss : std::exp(loss); }

}  // namespace

std::vector<double> moving_average(const std::vector<double>& values, int window) {
  const auto n = static_cast<int64_t>(values.size());
  const int64_t half = std::max(window, 1) / 2;
  // Prefix sums make every window O(1).
  std::vector<double> prefix(values.size() + 1, 0.0);
  for (int64_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + values[i];
  std::vector<double> out(values.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t h = std::min({half, i, n - 1 - i});
    out[i] = (prefix[i + h + 1] - prefix[i - h]) / static_cast<double>(2 * h + 1);
  }
  return out;
}

int auto_smooth_window(size_t points) { return std::max<int>(1, static_cast<int>(points / 50) | 1); }

TimeUnit time_unit(double max_seconds) {
  if (max_seconds > 3 * 3600) return {3600, "h"};
  if (max_seconds > 600) return {60, "min"};
  return {1, "s"};
}

RunCurves run_curves(const RunLog& log, const CurveOptions& options) {
  RunCurves curves;
  std::vector<Point> step_to_x;  // for the evals
  std::vector<double> xs, losses;
  for (const StepRecord& r : log.steps) {
    const double x = step_x(r, options.x, log.path);
    step_to_x.push_back({static_cast<double>(r.step), x});
    if (!std::isfinite(r.loss)) continue;
    xs.push_back(x);
    losses.push_back(r.loss);
  }
  // Smoothing averages the loss, then maps it to the metric: averaging exp(loss) instead would
  // let a few spikes pull the perplexity curve up.
  const std::vector<double> smooth = options.smooth > 1 ? moving_average(losses, options.smooth) : losses;
  for (size_t i = 0; i < xs.size(); ++i) {
    curves.train.push_back({xs[i], metric_of(smooth[i], options.metric)});
    if (options.smooth > 1) curves.train_raw.push_back({xs[i], metric_of(losses[i], options.metric)});
  }
  for (const EvalRecord& r : log.evals) {
    if (!r.split.empty() && r.split != options.split) continue;
    double x = static_cast<double>(r.step);
    if (options.x != XQuantity::Step) {
      LINEA_CHECK(!step_to_x.empty(), "plot", log.path, ", line ", r.line,
                  ": an eval record needs step records around it to be placed by ", field_name(options.x));
      x = interpolated_x(step_to_x, r.step);
    }
    const double y = options.metric == Metric::Perplexity && std::isfinite(r.ppl) ? r.ppl : metric_of(r.loss, options.metric);
    if (std::isfinite(y)) curves.valid.push_back({x, y});
  }
  return curves;
}

}  // namespace linea::plot
