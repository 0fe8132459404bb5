#pragma once
// The scales of a chart: an axis's range, its tick values at "nice" numbers (1, 2 or 5 times a
// power of ten) and their labels.
#include <string>
#include <vector>

namespace linea::plot {

// A range of data values and how it maps onto [0, 1] of the plot: linearly, or linearly in
// log10 of the value (lo and hi then positive).
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  // Where v falls: 0 at lo, 1 at hi (outside [0, 1] for values outside the range).
  double fraction(double v) const;
};

// An axis spanning data from min to max with a little room on each side (padding of the span,
// in log10 for a log axis), so no point or marker sits on the frame, not even at step 0. A single
// value gets a span around it.
Axis padded_axis(double min, double max, bool log, double padding = 0.04);

// The smallest 1, 2 or 5 x 10^k that is >= raw (raw > 0).
double nice_step(double raw);

// Tick values inside an axis; step > 0 when they are evenly spaced by it (labels then share its
// number of decimals), 0 when they are not (1, 2, 5 x 10^k on a log axis).
struct Ticks {
  std::vector<double> values;
  double step = 0;
};

// At most max_ticks (>= 2) multiples of a nice step within [lo, hi]. Multiples of a step that are
// zero up to rounding are exactly 0, so a label never reads "-0.0" or "1e-17".
Ticks linear_ticks(double lo, double hi, int max_ticks);
// A log axis: 1, 2, 5 x 10^k when those fit, else powers of ten (every n-th when there are too
// many); an axis shorter than a decade gets linear ticks, which still read as round numbers.
Ticks log_ticks(double lo, double hi, int max_ticks);
Ticks axis_ticks(const Axis& axis, int max_ticks);

// Labels for ticks: evenly spaced ticks share one suffix, chosen by the largest (k from 10,000, M
// from 1e6, G from 1e9: "250k", "1.5M"), and as many decimals as the step needs; other ticks are
// each written in their shortest form ("0.001", "20", "5k").
std::vector<std::string> tick_labels(const Ticks& ticks);

}  // namespace linea::plot
