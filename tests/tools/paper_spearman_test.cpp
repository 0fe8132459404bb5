// The Spearman rank correlation `linea paper`'s tables report (tools/paper/spearman.h), against
// values computed by hand, with and without ties.
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/error.h"
#include "tests/test_util.h"
#include "tools/paper/spearman.h"

namespace linea::cli::paper {
namespace {

using V = std::vector<double>;

TEST(PaperSpearman, AverageRanksShareTheRanksOfATie) {
  EXPECT_EQ(average_ranks({10, 20, 20, 30}), (V{1, 2.5, 2.5, 4}));
  EXPECT_EQ(average_ranks({3, 1, 3, 3}), (V{3, 1, 3, 3}));  // the three 3s hold ranks 2, 3, 4
  EXPECT_EQ(average_ranks({30, 10, 20}), (V{3, 1, 2}));
  // A diverged row is +inf: ranked last, and two of them tie.
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(average_ranks({inf, 1, inf}), (V{2.5, 1, 2.5}));
}

TEST(PaperSpearman, WithoutTiesItIsOneMinusSixSumDSquared) {
  // d = 0, -1, 1, -1, 1: 1 - 6 * 4 / (5 * 24) = 0.8.
  EXPECT_NEAR(spearman_correlation({10, 20, 30, 40, 50}, {1, 3, 2, 5, 4}), 0.8, 1e-12);
  EXPECT_NEAR(spearman_correlation({1, 2, 3, 4}, {40, 30, 20, 10}), -1.0, 1e-12);
  // Only the ordering counts, not the scale: the paper's Table 4 (from scratch) against itself x 10.
  const V paper = {18.5, 28.5, 31.3, 22.4, 20.8, 19.0, 17.8};
  V scaled;
  for (double p : paper) scaled.push_back(10 * p + 3);
  EXPECT_NEAR(spearman_correlation(paper, scaled), 1.0, 1e-12);
}

TEST(PaperSpearman, WithTiesItIsPearsonOfTheAverageRanks) {
  // b's ranks: 1, 2, 3.5, 5, 3.5. Deviations from the mean rank 3: a -2 -1 0 1 2, b -2 -1 .5 2 .5;
  // covariance sum 8, variances 10 and 9.5: 8 / sqrt(95).
  EXPECT_NEAR(spearman_correlation({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}), 8 / std::sqrt(95.0), 1e-12);
  // = 0.82078; the shortcut 1 - 6 sum d^2 / (n (n^2 - 1)) would give 1 - 6 * 3.5 / 120 = 0.825: not
  // the definition once there are ties.
  EXPECT_GT(std::abs(spearman_correlation({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}) - 0.825), 1e-3);
}

TEST(PaperSpearman, NoOrderingIsNaNAndBadInputIsAnError) {
  EXPECT_TRUE(std::isnan(spearman_correlation({1, 2, 3}, {7, 7, 7})));
  EXPECT_THROW(spearman_correlation({1, 2, 3}, {1, 2}), Error);
  EXPECT_THROW(spearman_correlation({1}, {1}), Error);
}

}  // namespace
}  // namespace linea::cli::paper
