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

struct Tolerance {
  double rtol, atol;
};

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
  ASSERT_TRUE(matches_cpu(y_gpu, y_cpu, tol.rtol, tol.atol)) << "forward";
  if (y_cpu.numel() == 0 || !y_cpu.requires_grad()) return;
  const Tensor u = random_normal(y_cpu.shape(), y_cpu.dtype(), seed);
  const auto g_cpu = grad(y_cpu, on_cpu, u, false, true), g_gpu = grad(y_gpu, on_cuda, on_gpu(u), false, true);
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_EQ(g_gpu[i].defined(), g_cpu[i].defined()) << "gradient of input " << i;
    if (g_cpu[i].defined()) EXPECT_TRUE(matches_cpu(g_gpu[i], g_cpu[i], tol.rtol, tol.atol)) << "gradient of input " << i;
  }
}

}  // namespace linea::testing
