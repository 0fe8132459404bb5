#include "tools/paper/spearman.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tensor/error.h"

namespace linea::cli::paper {

std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return values[i] < values[j]; });
  std::vector<double> ranks(values.size());
  for (size_t start = 0; start < order.size();) {
    size_t end = start + 1;  // [start, end): one run of equal values
    while (end < order.size() && values[order[end]] == values[order[start]]) ++end;
    // Positions start .. end-1 hold ranks start+1 .. end: their average.
    const double rank = 0.5 * static_cast<double>(start + 1 + end);
    for (size_t i = start; i < end; ++i) ranks[order[i]] = rank;
    start = end;
  }
  return ranks;
}

double spearman_correlation(const std::vector<double>& a, const std::vector<double>& b) {
  LINEA_CHECK(a.size() == b.size(), "paper.spearman", "the two orderings have ", a.size(), " and ", b.size(), " values");
  LINEA_CHECK(a.size() >= 2, "paper.spearman", "a rank correlation needs at least 2 values, got ", a.size());
  const std::vector<double> ra = average_ranks(a), rb = average_ranks(b);
  const double n = static_cast<double>(a.size());
  const double mean = (n + 1) / 2;  // of any set of average ranks
  double cov = 0, var_a = 0, var_b = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    var_a += (ra[i] - mean) * (ra[i] - mean);
    var_b += (rb[i] - mean) * (rb[i] - mean);
  }
  if (var_a == 0 || var_b == 0) return std::numeric_limits<double>::quiet_NaN();
  return cov / std::sqrt(var_a * var_b);
}

}  // namespace linea::cli::paper
