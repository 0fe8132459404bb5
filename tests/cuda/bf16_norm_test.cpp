// LayerNorm and RMSNorm on bfloat16 activations, and from float32 into bfloat16, on the GPU
// against the CPU kernels (tests/tensor/bf16_norm_test.cpp holds those to float64): rows the
// packed kernels take (whole 16-byte packs, one to eight per lane) and rows they leave to the
// row-group kernels (a width off the pack, rows past a warp's registers), with and without the
// parameters, and the backward with and without x's gradient from other consumers added (that
// one exactly: the bits of the separate addition).
// The GPU computes in float32 where the CPU computes in double: y and dx within one bfloat16 unit
// of the CPU's (plus float32's own error where dx cancels), the statistics within float32
// rounding of the row sums, the parameter gradients within a bound derived per column
// (parameter_gradient_bounds).
#include <cmath>
#include <random>
#include <string>

#include "tests/cuda/parity.h"
#include "tests/tensor/bf16_cases.h"

namespace linea::testing {
namespace {

// A bound on |GPU - CPU| of each column of a norm's parameter gradients, derived. dweight_j sums
// dy_ij xhat_ij over the rows i, dbias_j sums dy_ij. The GPU sums in float32 in its own order:
// at most (rows + 8) u of the sum of the terms' magnitudes (u = 2^-24). Its xhat comes from its
// own statistics: the row's variance and mean are float32 sums over the columns, off by at most
// (cols + 8) u of |x| + |mean| relative to the row's scale, so each xhat_ij is off by that much
// of (|x_ij| + |mean_i|) rstd_i. Each side rounds its result to float32 once more: 2 u of it.
// The magnitudes are the CPU's, in float64.
struct ParameterBounds {
  Tensor dweight, dbias;
};
ParameterBounds parameter_gradient_bounds(const NormCall& call, const NormForward& cpu, const Tensor& dy,
                                          const NormBackward& cpu_grads) {
  const double u = std::ldexp(1.0, -24);
  const int64_t rows = call.x.size(0), cols = call.x.size(1);
  const Tensor x = as_float64(call.x), g = abs(as_float64(dy));
  const Tensor rstd = reshape(as_float64(cpu.rstd), {rows, 1});
  const Tensor mean = call.rms ? zeros({rows, 1}, kFloat64) : reshape(as_float64(cpu.mean), {rows, 1});
  const Tensor scale = (abs(x) + abs(mean)) * rstd;  // |x| + |mean| in units of the row's scale
  const double gamma = static_cast<double>(rows + 8) * u, stats = static_cast<double>(cols + 8) * u;
  ParameterBounds b;
  if (cpu_grads.dweight.defined())
    b.dweight = sum(g * scale, {0}) * (gamma + stats) + abs(as_float64(cpu_grads.dweight)) * (2 * u);
  if (cpu_grads.dbias.defined()) b.dbias = sum(g, {0}) * gamma + abs(as_float64(cpu_grads.dbias)) * (2 * u);
  return b;
}

NormCall on_device(const NormCall& c) {
  auto moved = [](const Tensor& t) { return t.defined() ? on_gpu(t) : t; };
  return {c.rms, on_gpu(c.x), moved(c.weight), moved(c.bias), c.out, c.eps};
}

TEST(CudaBFloat16Norms, MatchTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  const uint64_t seed = std::random_device{}();
  const double unit = std::ldexp(1.0, -7);
  uint64_t draw = seed;
  for (const bool rms : {false, true})
    for (const auto& [in, out] : {std::pair{kBFloat16, kBFloat16}, {kFloat32, kBFloat16}})
      for (const int64_t cols : {8, 37, 512, 1024, 2000})
        for (const bool affine : {true, false}) {
          const int64_t rows = 301;
          const Tensor x = to(random_normal({rows, cols}, kFloat32, ++draw) * 2.0 + 0.7, in);
          const Tensor w = affine ? random_normal({cols}, kFloat32, ++draw) : Tensor();
          const Tensor b = affine && !rms ? random_normal({cols}, kFloat32, ++draw) : Tensor();
          const NormCall call{rms, x, w, b, out};
          const std::string what = std::string(rms ? "rms_norm " : "layer_norm ") + dtype_name(in) + " -> " +
                                    dtype_name(out) + " cols " + std::to_string(cols) +
                                    (affine ? "" : " no weight") + " seed " + std::to_string(seed);
          const NormForward cpu = norm_forward(call), gpu = norm_forward(on_device(call));
          EXPECT_TRUE(matches_cpu(gpu.y, cpu.y, unit, 1e-6)) << what;
          EXPECT_TRUE(matches_cpu(gpu.rstd, cpu.rstd, 1e-5, 0)) << what;
          if (!rms) EXPECT_TRUE(matches_cpu(gpu.mean, cpu.mean, 1e-5, 1e-5)) << what;

          const Tensor dy = to(random_normal({rows, cols}, kFloat32, ++draw), out);
          const NormBackward c = norm_backward(call, cpu, dy, Tensor());
          const NormBackward g = norm_backward(on_device(call), gpu, on_gpu(dy), Tensor());
          EXPECT_TRUE(matches_cpu(g.dx, c.dx, in == kBFloat16 ? unit : 1e-5, 1e-5)) << what << " dx";
          const ParameterBounds bound = parameter_gradient_bounds(call, cpu, dy, c);
          if (affine) EXPECT_TRUE(within_bound(g.dweight, c.dweight, bound.dweight)) << what << " dweight";
          if (affine && !rms) EXPECT_TRUE(within_bound(g.dbias, c.dbias, bound.dbias)) << what << " dbias";
          // x's gradient from other consumers joins as the separate addition would: dx rounded to
          // x's dtype, plus it, rounded again. Exactly, against this device's own dx.
          const Tensor also = on_gpu(to(random_normal({rows, cols}, kFloat32, ++draw), in));
          const NormBackward a = norm_backward(on_device(call), gpu, on_gpu(dy), also);
          EXPECT_TRUE(same_values(a.dx, to(to(g.dx, kFloat32) + to(also, kFloat32), in))) << what << " dx_add";
          if (affine) EXPECT_TRUE(same_values(a.dweight, g.dweight)) << what << " dweight with dx_add";
        }
}

// The op as the model calls it, on the GPU: a float32 residual stream normed into bfloat16 and
// back, with the gradient of x from its other consumers joining in the kernel.
TEST(CudaBFloat16Norms, TheOpFromFloat32IntoBfloat16) {
  LINEA_SKIP_WITHOUT_CUDA();
  const uint64_t seed = std::random_device{}();
  const Tensor x32 = random_normal({64, 512}, kFloat32, seed), w32 = random_normal({512}, kFloat32, seed + 1);
  const Tensor dy = to(random_normal({64, 512}, kFloat32, seed + 2), kBFloat16);
  auto run = [&](const Tensor& x0, const Tensor& w0, const Tensor& g) {
    const Tensor x = clone(x0).requires_grad_(), w = clone(w0).requires_grad_();
    const Tensor y = rms_norm(x, w, 1e-6, kBFloat16);
    EXPECT_EQ(y.dtype(), kBFloat16);
    const Tensor loss = sum(to(y, kFloat32) * to(g, kFloat32)) + sum(x * x);  // x reaches the loss twice
    return std::pair{y, grad(loss, {x, w})};
  };
  const auto [y_cpu, g_cpu] = run(x32, w32, dy);
  const auto [y_gpu, g_gpu] = run(on_gpu(x32), on_gpu(w32), on_gpu(dy));
  EXPECT_TRUE(matches_cpu(y_gpu, y_cpu, std::ldexp(1.0, -7), 1e-6)) << "seed " << seed;
  EXPECT_EQ(g_gpu[0].dtype(), kFloat32);
  EXPECT_TRUE(matches_cpu(g_gpu[0], g_cpu[0], 1e-5, 1e-5)) << "seed " << seed;
  // The weight's gradient sums dy xhat over the rows, as the kernel's dweight does.
  const NormCall call{true, x32, w32, Tensor(), kBFloat16, 1e-6};
  const NormForward stats = norm_forward(call);
  NormBackward cpu_grads;
  cpu_grads.dweight = g_cpu[1];
  const ParameterBounds bound = parameter_gradient_bounds(call, stats, dy, cpu_grads);
  EXPECT_EQ(g_gpu[1].dtype(), kFloat32);
  EXPECT_TRUE(within_bound(g_gpu[1], g_cpu[1], bound.dweight)) << "seed " << seed;
}

}  // namespace
}  // namespace linea::testing
