#include "tools/plot/axis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tensor/error.h"

namespace linea::plot {

namespace {

double to_scale(double v, bool log) { return log ? std::log10(v) : v; }
double from_scale(double v, bool log) { return log ? std::pow(10.0, v) : v; }

// A suffix and its divisor for numbers as large as magnitude; k starts at k_from.
struct Unit {
  const char* suffix;
  double divisor;
};
Unit unit_for(double magnitude, double k_from) {
  if (magnitude >= 1e9) return {"G", 1e9};
  if (magnitude >= 1e6) return {"M", 1e6};
  if (magnitude >= k_from) return {"k", 1e3};
  return {"", 1};
}

std::string format_fixed(double v, int decimals, const char* suffix) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f%s", decimals, v, suffix);
  return text;
}

}  // namespace

double Axis::fraction(double v) const {
  const double a = to_scale(lo, log), b = to_scale(hi, log);
  return (to_scale(v, log) - a) / (b - a);
}

Axis padded_axis(double min, double max, bool log, double padding) {
  LINEA_CHECK(std::isfinite(min) && std::isfinite(max) && min <= max, "plot", "axis range [", min, ", ", max,
              "] is not a finite range");
  LINEA_CHECK(!log || min > 0, "plot", "a log axis needs positive values, got ", min);
  double a = to_scale(min, log), b = to_scale(max, log);
  if (b - a < 1e-12 * std::max(1.0, std::abs(a))) {
    // One value: a span of a tenth of it (a decade's tenth on a log axis), or 1 around zero.
    const double half = log ? 0.05 : (a == 0 ? 0.5 : 0.05 * std::abs(a));
    a -= half, b += half;
  }
  const double pad = (b - a) * padding;
  return {from_scale(a - pad, log), from_scale(b + pad, log), log};
}

double nice_step(double raw) {
  LINEA_CHECK(raw > 0 && std::isfinite(raw), "plot", "tick step must be positive and finite, got ", raw);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw * (1 - 1e-9)) return m * power;
  return 10 * power;
}

Ticks linear_ticks(double lo, double hi, int max_ticks) {
  max_ticks = std::max(max_ticks, 2);
  Ticks ticks;
  if (!(hi > lo)) return ticks;
  // Tolerances of a millionth of a step keep a tick that rounding put just outside the range.
  auto first = [&](double step) { return static_cast<long long>(std::ceil((lo - step * 1e-6) / step)); };
  auto last = [&](double step) { return static_cast<long long>(std::floor((hi + step * 1e-6) / step)); };
  // The densest nice step that fits: from span / max_ticks up, 1 -> 2 -> 5 -> 10.
  double step = nice_step((hi - lo) / max_ticks);
  while (last(step) - first(step) + 1 > max_ticks) step = nice_step(step * 1.5);
  ticks.step = step;
  for (long long k = first(step); k <= last(step); ++k) ticks.values.push_back(k == 0 ? 0.0 : k * step);
  return ticks;
}

Ticks log_ticks(double lo, double hi, int max_ticks) {
  max_ticks = std::max(max_ticks, 2);
  if (!(lo > 0) || !(hi > lo)) return {};
  if (hi / lo < 10) return linear_ticks(lo, hi, max_ticks);
  const int first = static_cast<int>(std::floor(std::log10(lo))), last = static_cast<int>(std::ceil(std::log10(hi)));
  auto in_range = [&](double v) { return v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9); };
  Ticks fine, powers;
  for (int k = first; k <= last; ++k) {
    const double power = std::pow(10.0, k);
    for (double m : {1.0, 2.0, 5.0})
      if (in_range(m * power)) fine.values.push_back(m * power);
    if (in_range(power)) powers.values.push_back(power);
  }
  if (static_cast<int>(fine.values.size()) <= max_ticks) return fine;
  // Too many decades for every one to be labelled: every n-th power, n as small as fits.
  const size_t every = (powers.values.size() + max_ticks - 1) / max_ticks;
  Ticks thinned;
  for (size_t i = 0; i < powers.values.size(); i += every) thinned.values.push_back(powers.values[i]);
  return thinned;
}

Ticks axis_ticks(const Axis& axis, int max_ticks) {
  return axis.log ? log_ticks(axis.lo, axis.hi, max_ticks) : linear_ticks(axis.lo, axis.hi, max_ticks);
}

std::vector<std::string> tick_labels(const Ticks& ticks) {
  std::vector<std::string> labels;
  if (ticks.step > 0) {
    double largest = 0;
    for (double v : ticks.values) largest = std::max(largest, std::abs(v));
    // 5000 stays "5000"; from 10,000 up a suffix keeps labels short.
    const Unit unit = unit_for(largest, 1e4);
    const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(ticks.step / unit.divisor) + 1e-9)));
    for (double v : ticks.values)
      labels.push_back(v == 0 ? "0" : format_fixed(v / unit.divisor, decimals, unit.suffix));
    return labels;
  }
  for (double v : ticks.values) {
    const Unit unit = unit_for(std::abs(v), 1e3);
    char text[64];
    std::snprintf(text, sizeof text, "%.4g%s", v / unit.divisor, unit.suffix);
    labels.push_back(text);
  }
  return labels;
}

}  // namespace linea::plot
