#pragma once
// Spearman's rank correlation: how well linea's ordering of a table's rows matches the paper's,
// whatever the scale of the perplexities (linea's small runs and the paper's 160M models differ
// by an order of magnitude, their orderings need not).
#include <vector>

namespace linea::cli::paper {

// The rank of each value, 1 for the smallest; tied values share the average of the ranks they
// occupy ({10, 20, 20, 30} -> {1, 2.5, 2.5, 4}).
std::vector<double> average_ranks(const std::vector<double>& values);

// Pearson's correlation of the average ranks of a and b (which, with ties, is the definition; the
// shortcut 1 - 6 sum d^2 / (n (n^2 - 1)) holds only without them). linea::Error when the sizes
// differ or there are fewer than 2 values; NaN when either side is all ties (no ordering).
double spearman_correlation(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace linea::cli::paper
