// The multi-tensor AdamW kernel (cuda/kernels/adamw.cu) against the CPU oracle: the AdamW
// optimizer run side by side on both devices over several steps (more tensors than one launch
// takes, sizes around the chunk size, decay on and off, a parameter that misses a gradient so
// that update counts differ, the gradients read through a clipping scale on some steps), and one
// tensor longer than one launch's chunks. Without a GPU every test skips.
#include "tests/cuda/parity.h"
#include "train/adamw.h"

namespace linea::testing {
namespace {

using train::AdamW;
using train::AdamWOptions;
using train::NamedParameter;

// 30 parameters (more than the 24 tensors of one launch), sizes from 1 to past two chunks of 65536.
std::vector<NamedParameter> make_params(DType dtype, Device device) {
  const Shape shapes[] = {{1}, {3}, {1000}, {65537}, {257, 300}, {7, 11, 13}, {64}, {131072}, {2, 3}, {5000}};
  std::vector<NamedParameter> params;
  for (int i = 0; i < 30; ++i) {
    Tensor t = to(random_normal(shapes[i % 10], dtype, 100 + i), device);
    t.requires_grad_(true);
    params.push_back({"p" + std::to_string(i), t, i % 3 != 1});
  }
  return params;
}

// Gradients from (step, parameter) alone, so both devices see the same; parameter 5 has none in step 2.
void set_grads(const std::vector<NamedParameter>& params, int step) {
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i].tensor;
    if (i == 5 && step == 2) {
      p.set_grad(Tensor());
      continue;
    }
    p.set_grad(to(random_normal(p.shape(), p.dtype(), 1000 * step + i), p.device()));
  }
}

TEST(CudaAdamW, OptimizerMatchesCpuOverSeveralSteps) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : {kFloat64, kFloat32}) {
    SCOPED_TRACE(dtype_name(dtype));
    auto cpu_params = make_params(dtype, kCPU), gpu_params = make_params(dtype, gpu());
    const AdamWOptions options{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
    AdamW cpu_opt(cpu_params, options), gpu_opt(gpu_params, options);
    for (int step = 1; step <= 5; ++step) {
      cpu_opt.set_lr(1e-2 / step);
      gpu_opt.set_lr(1e-2 / step);
      set_grads(cpu_params, step);
      set_grads(gpu_params, step);
      const double clip_scale = step % 2 == 1 ? 0.3 : 1.0;  // Optimizer::step's grad_scale
      cpu_opt.step(clip_scale);
      gpu_opt.step(clip_scale);
    }
    // float32: the kernel computes in float32, the oracle in double, for 5 steps of size <= 1e-2.
    const double rtol = dtype == kFloat64 ? 1e-12 : 1e-5, atol = dtype == kFloat64 ? 1e-14 : 1e-6;
    for (size_t i = 0; i < cpu_params.size(); ++i)
      EXPECT_TRUE(matches_cpu(gpu_params[i].tensor, cpu_params[i].tensor, rtol, atol)) << cpu_params[i].name;
    const train::OptimizerState cpu_state = cpu_opt.state(), gpu_state = gpu_opt.state();
    for (const auto& [name, t] : cpu_state.tensors)
      EXPECT_TRUE(matches_cpu(gpu_state.tensors.at(name), t, rtol, atol)) << name;
    EXPECT_EQ(gpu_state.scalars.at("step.p5"), 4.0);
  }
}

// A tensor of more chunks than one launch holds is continued in the next launch.
TEST(CudaAdamW, LongTensorSpansLaunches) {
  LINEA_SKIP_WITHOUT_CUDA();
  const int64_t n = 320 * 65536 + 1001;
  const AdamWHyper hyper{1e-3, 0.9, 0.999, 1e-8, 0.01, 3, /*grad_scale=*/0.45};
  std::vector<Tensor> cpu_p = {random_normal({n}, kFloat32, 1), random_normal({5}, kFloat32, 2)};
  std::vector<Tensor> cpu_g = {random_normal({n}, kFloat32, 3), random_normal({5}, kFloat32, 4)};
  std::vector<Tensor> cpu_m = {random_normal({n}, kFloat32, 5) * 0.1, random_normal({5}, kFloat32, 6) * 0.1};
  std::vector<Tensor> cpu_v = {abs(random_normal({n}, kFloat32, 7)) * 0.01, abs(random_normal({5}, kFloat32, 8)) * 0.01};
  auto copy_all = [](const std::vector<Tensor>& ts) {
    std::vector<Tensor> out;
    for (const Tensor& t : ts) out.push_back(on_gpu(t));
    return out;
  };
  std::vector<Tensor> gpu_p = copy_all(cpu_p), gpu_g = copy_all(cpu_g), gpu_m = copy_all(cpu_m), gpu_v = copy_all(cpu_v);
  backend_for(kCPU).adamw_step(cpu_p, cpu_g, cpu_m, cpu_v, {true, false}, hyper);
  backend_for(gpu()).adamw_step(gpu_p, gpu_g, gpu_m, gpu_v, {true, false}, hyper);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(matches_cpu(gpu_p[i], cpu_p[i], 1e-5, 1e-6)) << "p " << i;
    EXPECT_TRUE(matches_cpu(gpu_m[i], cpu_m[i], 1e-5, 1e-7)) << "m " << i;
    EXPECT_TRUE(matches_cpu(gpu_v[i], cpu_v[i], 1e-5, 1e-8)) << "v " << i;
  }
}

TEST(CudaAdamW, RejectsMixedDtypes) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor p = on_gpu(random_normal({4}, kFloat32, 1)), q = on_gpu(random_normal({4}, kFloat64, 2));
  EXPECT_LINEA_ERROR(backend_for(gpu()).adamw_step({p, q}, {p, q}, {p, q}, {p, q}, {true, true},
                                                   AdamWHyper{1e-3, 0.9, 0.999, 1e-8, 0.0, 1}),
                     "adamw_step", "parameter 1");
}

}  // namespace
}  // namespace linea::testing
