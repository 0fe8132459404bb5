#pragma once
// From a run's records to the points a chart draws: the x quantity (step, tokens seen or time),
// the metric (loss, or perplexity = exp(loss)) and the smoothing of the noisy training curve.
#include <string>
#include <vector>

#include "tools/plot/raster.h"
#include "tools/plot/run_log.h"

namespace linea::plot {

enum class XQuantity { Step, Tokens, Time };
enum class Metric { Loss, Perplexity };

struct CurveOptions {
  XQuantity x = XQuantity::Step;
  Metric metric = Metric::Loss;
  std::string split = "valid";  // eval records of this split (or of none) are the validation curve
  int smooth = 1;               // moving-average window in points; 1 is none
};

// Data coordinates; x in steps, tokens or seconds.
struct RunCurves {
  std::vector<Point> train;      // smoothed when smooth > 1
  std::vector<Point> train_raw;  // the unsmoothed points when smooth > 1, else empty
  std::vector<Point> valid;
};

// Steps whose loss is not finite (a diverged run) are left out: they cannot be drawn. An eval
// record has no tokens or time of its own; it takes those of its step from the step records,
// interpolated linearly between the nearest two. With x = tokens or time, a step record without
// that field is an error naming its line.
RunCurves run_curves(const RunLog& log, const CurveOptions& options);

// Centered moving average over window points (odd or even; the window shrinks symmetrically near
// the ends, so the first and last points stay unsmoothed). Centered rather than trailing, so the
// smoothed curve does not lag behind the validation points of the same step.
std::vector<double> moving_average(const std::vector<double>& values, int window);

// The window --smooth 0 picks for a curve of this many points: about 1/50 of them, so the trend
// shows and the raw curve behind it still shows the noise.
int auto_smooth_window(size_t points);

// The unit a time axis reads in: seconds up to 10 minutes, then minutes up to 3 hours, then hours.
struct TimeUnit {
  double seconds;
  const char* name;  // "s", "min", "h"
};
TimeUnit time_unit(double max_seconds);

}  // namespace linea::plot
