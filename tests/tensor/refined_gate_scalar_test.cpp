// The refined gate's scalar formula (tensor/scalar_math.h: refined_log_gate, shared by the CPU and
// CUDA kernels) against the term-by-term formula it replaced, evaluated in long double: value and
// both derivatives, in float32 and float64, at |a|, |c| from 1e-30 to 1e4, at infinities and NaN.
// The reference is written here on purpose (it is the old kernel's code): one log-sigmoid per term,
// logaddexp with its own exps, sigmoid(c) and sigmoid(-c) each from its own exp.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tensor/scalar_math.h"
#include "tests/test_util.h"

namespace linea {
namespace {

template <class T>
scalar::RefinedLogGate<T> term_by_term(T a, T c) {
  using scalar::log_sigmoid, scalar::sigmoid;
  const T first = log_sigmoid(a), second = (log_sigmoid(c) + T(scalar::kLn2)) + log_sigmoid(-a);
  const T shift = first > second ? first : second;
  const T e1 = std::exp(first - shift), e2 = std::exp(second - shift), total = e1 + e2;
  const T r = sigmoid(c), one_minus_r = sigmoid(-c);
  return {first + (shift + std::log(total)), sigmoid(-a) * (T(1) + (one_minus_r - r) * (e1 / total)),
          (e2 / total) * one_minus_r};
}

std::vector<double> extreme_arguments() {
  std::vector<double> v;
  for (double m : {1e-30, 1e-7, 1e-3, 0.5, 1.0, 2.5, 10.0, 30.0, 40.0, 45.0, 88.0, 90.0, 104.0, 110.0, 700.0, 710.0,
                   750.0, 1e3, 1e4}) {
    v.push_back(m);
    v.push_back(-m);
  }
  v.push_back(0.0);
  v.push_back(-0.0);
  return v;
}

// |actual - exact| within a few of T's rounding units of the result, or within a few times the error
// the term-by-term formula makes in T (its inputs' rounding in T is the same for both).
template <class T>
::testing::AssertionResult close_enough(T actual, T old, long double exact, const char* what, double a, double c) {
  const long double eps = std::numeric_limits<T>::epsilon();
  const long double err = std::fabs(static_cast<long double>(actual) - exact);
  const long double old_err = std::fabs(static_cast<long double>(old) - exact);
  const long double scale = std::fabs(exact) > 1 ? std::fabs(exact) : 1;
  if (std::isfinite(actual) && (err <= 8 * eps * scale || err <= 4 * old_err)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << " at a = " << a << ", c = " << c << ": " << actual
                                       << ", term by term in long double " << static_cast<double>(exact)
                                       << ", in the same type " << old;
}

template <class T>
void expect_matches_long_double() {
  const std::vector<double> args = extreme_arguments();
  for (double ad : args)
    for (double cd : args) {
      const T a = static_cast<T>(ad), c = static_cast<T>(cd);
      const auto fused = scalar::refined_log_gate(a, c);
      const auto old = term_by_term(a, c);
      const auto exact = term_by_term(static_cast<long double>(a), static_cast<long double>(c));
      EXPECT_TRUE(close_enough(fused.value, old.value, exact.value, "value", ad, cd));
      EXPECT_TRUE(close_enough(fused.d_a, old.d_a, exact.d_a, "d_a", ad, cd));
      EXPECT_TRUE(close_enough(fused.d_c, old.d_c, exact.d_c, "d_c", ad, cd));
    }
}

TEST(RefinedGateScalar, MatchesTheTermByTermFormulaInLongDouble) {
  expect_matches_long_double<float>();
  expect_matches_long_double<double>();
}

// The same infinity, both NaN, or numbers within a few rounding units (the two formulas round
// differently).
template <class T>
bool agrees(T x, T y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  if (std::isinf(x) || std::isinf(y)) return x == y;
  const T scale = std::fabs(y) > 1 ? std::fabs(y) : T(1);
  return std::fabs(x - y) <= 8 * std::numeric_limits<T>::epsilon() * scale;
}

// Infinite and NaN arguments give what the term-by-term formula gives in the same type: log f = 0
// at a = +inf, -inf at a = -inf (d_a = 1), NaN when both of log u's terms are -inf (a = c = -inf)
// or an argument is NaN.
template <class T>
void expect_same_non_finite_behaviour() {
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> args = {-inf, inf, nan, T(-1e4), T(-3), T(0), T(2.5), T(1e4)};
  for (T a : args)
    for (T c : args) {
      if (std::isfinite(a) && std::isfinite(c)) continue;
      const auto fused = scalar::refined_log_gate(a, c), old = term_by_term(a, c);
      const std::string at = " at a = " + std::to_string(a) + ", c = " + std::to_string(c);
      EXPECT_TRUE(agrees(fused.value, old.value)) << "value" << at << ": " << fused.value << " vs " << old.value;
      EXPECT_TRUE(agrees(fused.d_a, old.d_a)) << "d_a" << at << ": " << fused.d_a << " vs " << old.d_a;
      EXPECT_TRUE(agrees(fused.d_c, old.d_c)) << "d_c" << at << ": " << fused.d_c << " vs " << old.d_c;
    }
}

TEST(RefinedGateScalar, InfinitiesAndNanAsBefore) {
  expect_same_non_finite_behaviour<float>();
  expect_same_non_finite_behaviour<double>();
}

}  // namespace
}  // namespace linea
