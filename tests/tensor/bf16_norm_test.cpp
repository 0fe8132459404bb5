// LayerNorm and RMSNorm on bfloat16 activations, and from float32 into bfloat16, on the CPU. The
// kernels compute every element in double from exactly widened inputs, keep the statistics and
// the parameters' gradients in float32 and round each result once, so each output is exactly the
// float64 kernel's on the widened inputs, rounded: y and the statistics from the forward; dx and
// the parameter gradients from the backward when the float64 kernel is handed the same float32
// statistics (the backward reads what the forward saved). Then the op as users call it: dtypes of
// results and gradients, a bfloat16 weight widened through its cast, and the errors.
#include <random>
#include <string>

#include "tests/tensor/bf16_cases.h"
#include "tests/test_util.h"

namespace linea::testing {
namespace {

std::string describe(const NormCall& c) {
  return std::string(c.rms ? "rms_norm " : "layer_norm ") + dtype_name(c.x.dtype()) + " -> " + dtype_name(c.out) +
         " " + c.x.describe();
}

TEST(BFloat16Norms, EqualTheFloat64KernelRoundedOnce) {
  Generator gen(std::random_device{}());
  for (const bool rms : {false, true})
    for (const auto& [in, out] : {std::pair{kBFloat16, kBFloat16}, {kFloat32, kBFloat16}})
      for (const int64_t cols : {1, 37, 512}) {
        const Tensor x = to(randn({13, cols}, kFloat32, &gen) * 2.0 + 0.7, in);
        const Tensor w = randn({cols}, kFloat32, &gen), b = rms ? Tensor() : randn({cols}, kFloat32, &gen);
        const NormCall call{rms, x, w, b, out};
        const NormCall exact{rms, to(x, kFloat64), as_float64(w), as_float64(b), kFloat64};
        const std::string what = describe(call);

        const NormForward got = norm_forward(call), ref = norm_forward(exact);
        EXPECT_EQ(got.y.dtype(), out) << what;
        EXPECT_EQ(got.rstd.dtype(), kFloat32) << what;
        EXPECT_TRUE(all_close(got.y, to(ref.y, out), 0, 0)) << what;
        EXPECT_TRUE(all_close(got.rstd, to(ref.rstd, kFloat32), 0, 0)) << what;
        if (!rms) EXPECT_TRUE(all_close(got.mean, to(ref.mean, kFloat32), 0, 0)) << what;

        // The backward, with x's gradient from its other consumers added (as the separate addition
        // would: dx rounded to x's dtype, then the sum rounded again).
        const Tensor dy = to(randn({13, cols}, kFloat32, &gen), out), add = to(randn({13, cols}, kFloat32, &gen), in);
        const NormBackward g = norm_backward(call, got, dy, add);
        const NormBackward r =
            norm_backward(exact, {Tensor(), as_float64(got.mean), as_float64(got.rstd)}, to(dy, kFloat64), Tensor());
        EXPECT_EQ(g.dx.dtype(), in) << what;
        EXPECT_TRUE(all_close(g.dx, to(to(to(r.dx, in), kFloat32) + to(add, kFloat32), in), 0, 0)) << what << " dx";
        EXPECT_TRUE(all_close(g.dweight, to(r.dweight, kFloat32), 0, 0)) << what << " dweight";
        if (!rms) EXPECT_TRUE(all_close(g.dbias, to(r.dbias, kFloat32), 0, 0)) << what << " dbias";
      }
}

// As users call them: y in the asked dtype, x's gradient in x's, the parameters' in theirs; a
// bfloat16 weight is widened to float32 and its gradient comes back through the cast. The values
// are the kernels' (tested above); here against float64 within bfloat16's unit.
TEST(BFloat16Norms, TheOpsTakeBfloat16AndMixedDtypes) {
  Generator gen(std::random_device{}());
  const double unit = std::ldexp(1.0, -7);
  const Tensor x32 = randn({5, 24}, kFloat32, &gen) * 1.5 - 0.3, dy32 = randn({5, 24}, kFloat32, &gen);
  const Tensor w32 = randn({24}, kFloat32, &gen) + 1.0, b32 = randn({24}, kFloat32, &gen);
  const Tensor x64 = to(x32, kFloat64).requires_grad_(), w64 = to(w32, kFloat64).requires_grad_();
  const Tensor b64 = to(b32, kFloat64).requires_grad_();
  const Tensor y64 = layer_norm(x64, w64, b64);
  const auto exact = grad(y64, {x64, w64, b64}, to(dy32, kFloat64));

  // float32 in, bfloat16 out, float32 parameters.
  const Tensor x = clone(x32).requires_grad_(), w = clone(w32).requires_grad_(), b = clone(b32).requires_grad_();
  const Tensor y = layer_norm(x, w, b, 1e-5, kBFloat16);
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_TRUE(all_close(y, y64, unit, 1e-30));
  const auto g = grad(y, {x, w, b}, to(dy32, kBFloat16));
  EXPECT_EQ(g[0].dtype(), kFloat32);
  EXPECT_EQ(g[1].dtype(), kFloat32);
  // dy rounded to bfloat16 moves the gradients by up to a unit of dy; float32 math after that.
  EXPECT_TRUE(all_close(g[0], exact[0], 4 * unit, 4 * unit));
  EXPECT_TRUE(all_close(g[1], exact[1], 4 * unit, 4 * unit));

  // bfloat16 in and out; a bfloat16 weight is widened, its gradient bfloat16.
  const Tensor xb = to(x32, kBFloat16).requires_grad_(), wb = to(w32, kBFloat16).requires_grad_();
  const Tensor yb = rms_norm(xb, wb);
  EXPECT_EQ(yb.dtype(), kBFloat16);
  const auto gb = grad(yb, {xb, wb}, to(dy32, kBFloat16));
  EXPECT_EQ(gb[0].dtype(), kBFloat16);
  EXPECT_EQ(gb[1].dtype(), kBFloat16);
  const Tensor xe = to(detach(xb), kFloat64).requires_grad_(), we = to(detach(wb), kFloat64).requires_grad_();
  const auto ge = grad(rms_norm(xe, we), {xe, we}, to(to(dy32, kBFloat16), kFloat64));
  EXPECT_TRUE(all_close(yb, rms_norm(to(xb, kFloat64), to(wb, kFloat64)), unit, 1e-30));
  EXPECT_TRUE(all_close(gb[0], ge[0], unit, 1e-6));
  EXPECT_TRUE(all_close(gb[1], ge[1], unit, 1e-6));
}

TEST(BFloat16Norms, WrongDtypesAreNamed) {
  const Tensor x = randn({3, 8}, kFloat32);
  EXPECT_LINEA_ERROR(layer_norm(to(x, kFloat64), ones({8}, kFloat32), Tensor()), "layer_norm", "weight",
                     "float64");
  EXPECT_LINEA_ERROR(rms_norm(x, ones({8}, kFloat32), 1e-6, kFloat64), "rms_norm", "float32", "float64");
  EXPECT_LINEA_ERROR(rms_norm(to(x, kBFloat16), Tensor(), 1e-6, kFloat32), "rms_norm", "bfloat16", "float32");
  EXPECT_LINEA_ERROR(layer_norm(x, ones({8}, kFloat64), Tensor()), "layer_norm", "weight", "float32");
}

}  // namespace
}  // namespace linea::testing
