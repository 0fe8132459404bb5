// The bfloat16 gated scan on the CPU (autograd/ops.h: gated_linear_scan with bfloat16 q, k, v and
// float32 decays and states): the float32 kernel run on the widened activations, its bfloat16
// results rounded once, bit for bit; the dtypes of its outputs and gradients; its errors.
#include <vector>

#include "nn/linear_attention/scan.h"
#include "tests/nn/scan_inputs.h"
#include "tests/test_util.h"

namespace linea {
namespace {

using testing::Decay;
using testing::ScanInputs;

struct Layout {
  Decay key, value;
};
const Layout kLayouts[] = {{Decay::None, Decay::None},
                           {Decay::Scalar, Decay::PerChannel},
                           {Decay::PerChannel, Decay::None},
                           {Decay::PerChannel, Decay::PerChannel},
                           {Decay::None, Decay::Scalar}};

// Same dtype, shape and values.
::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return ::testing::AssertionFailure() << a.describe() << " vs " << b.describe();
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] != y[i]) return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  return ::testing::AssertionSuccess();
}

// The float32 scan of the same values: the bfloat16 inputs widened, the decays and state as they are.
ScanInputs float32_twin(const ScanInputs& b) {
  auto leaf = [](const Tensor& t) { return t.defined() ? to(detach(t), kFloat32).requires_grad_() : Tensor(); };
  return {leaf(b.q), leaf(b.k), leaf(b.v), leaf(b.gk), leaf(b.gv), leaf(b.s0)};
}

// Each result of a bfloat16 scan equals the float32 scan's on the widened inputs, rounded to
// bfloat16 where the result is bfloat16 (o and the gradients of q, k, v), exact where it is
// float32 (the final state, the decays' and the initial state's gradients).
TEST(GatedScanBFloat16, IsTheFloat32ScanOfTheWidenedInputsRoundedOnce) {
  uint64_t seed = 300;
  for (const Layout& l : kLayouts)
    for (const int64_t steps : {1, 23, 70}) {
      const bool initial_state = steps != 23;
      const testing::ScanShape shape{2, 3, steps, 12, 9};
      const ScanInputs b = testing::bfloat16_scan_inputs(
          testing::draw_scan_inputs(l.key, l.value, initial_state, shape, kFloat64, ++seed), kCPU);
      const ScanInputs f = float32_twin(b);
      Generator gen(++seed);
      const Tensor dout = to(randn({2, 3, steps, 9}, kFloat32, &gen), kBFloat16);
      const Tensor dfinal = randn({2, 3, 9, 12}, kFloat32, &gen);

      const ScanResult rb = gated_linear_scan_with_state(b.q, b.k, b.v, b.gk, b.gv, b.s0);
      const ScanResult rf = gated_linear_scan_with_state(f.q, f.k, f.v, f.gk, f.gv, f.s0);
      ASSERT_EQ(rb.out.dtype(), kBFloat16);
      ASSERT_EQ(rb.final_state.dtype(), kFloat32);
      EXPECT_TRUE(same_bits(rb.out, to(rf.out, kBFloat16))) << "o, seed " << seed;
      EXPECT_TRUE(same_bits(rb.final_state, rf.final_state)) << "S_T, seed " << seed;

      const std::vector<Tensor> inb = b.differentiable(), inf = f.differentiable();
      const std::vector<Tensor> gb = grad(
          sum(to(rb.out, kFloat32) * to(dout, kFloat32)) + sum(rb.final_state * dfinal), inb);
      const std::vector<Tensor> gf =
          grad(sum(rf.out * to(dout, kFloat32)) + sum(rf.final_state * dfinal), inf);
      for (size_t i = 0; i < gb.size(); ++i) {
        ASSERT_EQ(gb[i].dtype(), inb[i].dtype()) << "gradient " << i;
        EXPECT_TRUE(same_bits(gb[i], to(gf[i], inb[i].dtype()))) << "gradient " << i << ", seed " << seed;
      }
    }
}

TEST(GatedScanBFloat16, KeepsItsDecaysAndStatesInFloat32) {
  const ScanInputs b = testing::bfloat16_scan_inputs(
      testing::draw_scan_inputs(Decay::PerChannel, Decay::Scalar, true, {1, 2, 5, 4, 3}, kFloat64, 9), kCPU);
  EXPECT_LINEA_ERROR(gated_linear_scan(b.q, b.k, b.v, to(b.gk, kBFloat16), b.gv), "gated_linear_scan", "float32",
                     "decays and states");
  EXPECT_LINEA_ERROR(gated_linear_scan(b.q, b.k, b.v, b.gk, b.gv, to(b.s0, kBFloat16)), "gated_linear_scan",
                     "initial state");
  EXPECT_LINEA_ERROR(gated_linear_scan(b.q, to(b.k, kFloat32), b.v, b.gk, b.gv), "gated_linear_scan", "dtype");
  // A float32 scan's decays stay float32: a float64 decay is refused as before.
  EXPECT_LINEA_ERROR(gated_linear_scan(to(b.q, kFloat32), to(b.k, kFloat32), to(b.v, kFloat32), to(b.gk, kFloat64),
                                       b.gv),
                     "gated_linear_scan", "float32");
  // The composite forms are float32 and float64 only.
  EXPECT_LINEA_ERROR(nn::linear::chunked_scan(b.q, b.k, b.v, b.gk, b.gv), "chunked_scan", "bfloat16 scan");
}

}  // namespace
}  // namespace linea
