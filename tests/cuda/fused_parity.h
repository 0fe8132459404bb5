#pragma once
// Parity of a differentiable function on the two devices, for the fused-kernel tests: the same
// function run on CPU leaves (the oracle) and on GPU copies of them must agree in value and in the
// gradient of every input for one random cotangent.
#include <functional>
#include <string>
#include <vector>

#include "tests/cuda/parity.h"

namespace linea::testing {

using DeviceFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Elementwise |gpu - cpu| <= atol + rtol |cpu|; or, with of_max, the largest difference against
// rtol times the largest |cpu| (+ atol), the measure for TF32 results, whose error is relative to
// the magnitudes summed rather than to each result.
struct Tolerance {
  double rtol, atol;
  bool of_max = false;
};

inline ::testing::AssertionResult within(const Tensor& gpu_result, const Tensor& cpu_result, const Tolerance& tol) {
  if (!tol.of_max) return matches_cpu(gpu_result, cpu_result, tol.rtol, tol.atol);
  if (gpu_result.shape() != cpu_result.shape() || gpu_result.dtype() != cpu_result.dtype())
    return ::testing::AssertionFailure() << "got " << gpu_result.describe() << ", expected " << cpu_result.describe();
  const double diff = max_abs_diff(to(gpu_result, kCPU), cpu_result);
  const double scale = cpu_result.numel() == 0 ? 0.0 : max(abs(cpu_result)).item();
  if (diff <= tol.atol + tol.rtol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "largest difference " << diff << " against the largest value " << scale
                                       << " (allowed " << tol.atol << " + " << tol.rtol << " of it)";
}

inline void expect_device_parity(const DeviceFn& fn, const std::vector<Tensor>& inputs, Tolerance tol,
                                 const std::string& what, uint64_t seed = 99) {
  SCOPED_TRACE(what);
  std::vector<Tensor> on_cpu, on_cuda;
  for (const Tensor& x : inputs) {
    Tensor c = clone(detach(x)), g = on_gpu(detach(x));
    on_cpu.push_back(c.requires_grad_(true));
    on_cuda.push_back(g.requires_grad_(true));
  }
  const Tensor y_cpu = fn(on_cpu), y_gpu = fn(on_cuda);
  ASSERT_TRUE(within(y_gpu, y_cpu, tol)) << "forward";
  if (y_cpu.numel() == 0 || !y_cpu.requires_grad()) return;
  const Tensor u = random_normal(y_cpu.shape(), y_cpu.dtype(), seed);
  const auto g_cpu = grad(y_cpu, on_cpu, u, false, true), g_gpu = grad(y_gpu, on_cuda, on_gpu(u), false, true);
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_EQ(g_gpu[i].defined(), g_cpu[i].defined()) << "gradient of input " << i;
    if (g_cpu[i].defined()) EXPECT_TRUE(within(g_gpu[i], g_cpu[i], tol)) << "gradient of input " << i;
  }
}

}  // namespace linea::testing
