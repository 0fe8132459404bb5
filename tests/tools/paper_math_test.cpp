// The numbers behind `linea paper` (tools/paper/): Theorem 3.1's Monte Carlo against its closed
// form within the tolerance its sample count allows, and the refined gate's autograd gradient
// against the closed form derived in docs/paper.md.
#include <cmath>
#include <vector>

#include "tests/test_util.h"
#include "tools/paper/gates_math.h"
#include "tools/paper/theorem_math.h"

namespace linea::cli::paper {
namespace {

// Four standard errors: a fixed seed passes or fails for good, and a correct estimator strays
// that far with probability ~6e-5 under the normal approximation.
constexpr double kStandardErrors = 4.0;

TEST(PaperTheorem, ClosedFormsAreTheTheorems) {
  const double e2 = std::exp(2.0);
  EXPECT_DOUBLE_EQ(inner_product_variance(InnerProductMap::Identity, 64), 64.0);
  EXPECT_NEAR(inner_product_variance(InnerProductMap::Exp, 64), 64 * e2 * (e2 - 1), 1e-9);
  EXPECT_NEAR(attention_output_variance(InnerProductMap::Exp, 16, 3), 3 * (16 * e2 * (e2 - 1) + 256 * e2), 1e-8);
  EXPECT_DOUBLE_EQ(attention_output_variance(InnerProductMap::Identity, 16, 5), 80.0);
  // The identity map's inner product has kurtosis 9 / d + 3 (d - 1) / d: at d = 1, n = 10^4,
  // Var(s^2) / sigma^4 = (9 - (n - 3)/(n - 1)) / n.
  const double n = 1e4;
  EXPECT_NEAR(variance_relative_standard_error(InnerProductMap::Identity, 1, 10000),
              std::sqrt((9 - (n - 3) / (n - 1)) / n), 1e-12);
}

TEST(PaperTheorem, MonteCarloAgreesWithTheClosedFormWithinItsStandardError) {
  Generator gen(2024);
  const int64_t samples = 1 << 16;
  for (InnerProductMap map : {InnerProductMap::Identity, InnerProductMap::Exp}) {
    for (int64_t d : {16, 64}) {
      const double expected = inner_product_variance(map, d);
      const double estimate = monte_carlo_inner_product_variance(map, d, samples, gen, 1 << 12);
      const double tolerance = kStandardErrors * variance_relative_standard_error(map, d, samples);
      EXPECT_LE(std::abs(estimate / expected - 1), tolerance)
          << inner_product_map_name(map) << " d=" << d << ": " << estimate << " vs " << expected;
    }
  }
}

TEST(PaperTheorem, AttentionOutputVarianceGrowsLinearlyInThePosition) {
  Generator gen(11);
  const int64_t d = 8, seq_len = 64, batch = 256;
  for (InnerProductMap map : {InnerProductMap::Identity, InnerProductMap::Exp}) {
    const std::vector<double> measured = monte_carlo_attention_output_variance(map, d, seq_len, batch, gen);
    ASSERT_EQ(measured.size(), static_cast<size_t>(seq_len));
    // Averaged over the last half of the positions, the ratio to the closed form is near 1: each
    // position pools 2048 values, the exp map's heavy tail allowing the wider margin.
    double ratio = 0;
    for (int64_t t = seq_len / 2 + 1; t <= seq_len; ++t) ratio += measured[t - 1] / attention_output_variance(map, d, t);
    ratio /= static_cast<double>(seq_len / 2);
    EXPECT_NEAR(ratio, 1.0, map == InnerProductMap::Exp ? 0.3 : 0.1) << inner_product_map_name(map);
  }
}

TEST(PaperGates, AutogradGradientEqualsTheClosedFormInFloat64) {
  // Fresh points: pre-activations drawn across the range the gates use, not the figure's grid.
  Generator gen(77);
  const std::vector<double> a = (randn({200}, kFloat64, &gen) * 4.0).to_vector<double>();
  const std::vector<double> c = (randn({200}, kFloat64, &gen) * 4.0).to_vector<double>();
  const std::vector<RefinedGateGradient> grads = refined_gate_gradient_autograd(a, c);
  const std::vector<double> sigmoid = sigmoid_gate_gradient_autograd(a);
  for (size_t i = 0; i < a.size(); ++i) {
    const double g = 1 / (1 + std::exp(-a[i])), r = 1 / (1 + std::exp(-c[i]));
    const RefinedGateGradient exact = refined_gate_gradient_closed_form(g, r);
    EXPECT_NEAR(grads[i].forget, exact.forget, 1e-12) << "a=" << a[i] << " c=" << c[i];
    EXPECT_NEAR(grads[i].refine, exact.refine, 1e-12) << "a=" << a[i] << " c=" << c[i];
    EXPECT_NEAR(sigmoid[i], sigmoid_gate_gradient(g), 1e-12) << "a=" << a[i];
  }
}

TEST(PaperGates, RefiningAtOneHalfIsTheSigmoidAndTheBoundsDoubleIt) {
  // r = 1/2 makes F = g; r = 1 near g = 0 and r = 0 near g = 1 give twice the sigmoid's gradient.
  for (double g : {0.01, 0.3, 0.9}) EXPECT_NEAR(refined_gate_gradient_closed_form(g, 0.5).forget, g * (1 - g), 1e-15);
  EXPECT_NEAR(refined_gate_gradient_closed_form(1e-6, 1.0).forget / sigmoid_gate_gradient(1e-6), 2.0, 1e-5);
  EXPECT_NEAR(refined_gate_gradient_closed_form(1 - 1e-6, 0.0).forget / sigmoid_gate_gradient(1 - 1e-6), 2.0, 1e-5);
}

}  // namespace
}  // namespace linea::cli::paper
