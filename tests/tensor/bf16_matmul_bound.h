#pragma once
// The error bound of a bfloat16 matmul (float32 accumulation), shared by the CPU reference's test
// and the cuBLAS kernel's parity test.
#include <cmath>

#include "tests/test_util.h"

namespace linea::testing {

// |bf16 matmul - exact| <= u16 |exact| + (1 + u16) gamma_K sum_k |a_ik b_kj| for the bfloat16
// operands a and b: the widened products are exact in float32 (8 x 8 significant bits), a float32
// sum of K terms errs by at most gamma_K = K u32 / (1 - K u32) times the sum of magnitudes, and the
// final rounding to bfloat16 by u16 = 2^-8 of the result. A float32 result (matmul_bf16) has no
// final rounding: u16 = 0.
inline ::testing::AssertionResult within_bf16_matmul_bound(const Tensor& result, const Tensor& a, const Tensor& b) {
  const int64_t k = a.size(-1);
  const double u16 = result.dtype() == kBFloat16 ? std::ldexp(1.0, -8) : 0.0;
  const double u32 = std::ldexp(1.0, -24), gamma = k * u32 / (1 - k * u32);
  const Tensor a64 = to(to(a, kCPU), kFloat64), b64 = to(to(b, kCPU), kFloat64);
  const auto exact = matmul(a64, b64).to_vector<double>(), magnitude = matmul(abs(a64), abs(b64)).to_vector<double>();
  const auto got = to(to(result, kCPU), kFloat64).to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = u16 * std::abs(exact[i]) + (1 + u16) * gamma * magnitude[i];
    if (!(std::abs(got[i] - exact[i]) <= bound))
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs exact " << exact[i]
                                           << " (bound " << bound << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace linea::testing
