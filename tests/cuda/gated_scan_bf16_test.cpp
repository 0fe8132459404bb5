// The bfloat16 gated scan on the GPU (bfloat16 q, k, v; float32 decays and states) against the
// float64 scan of the same values on the CPU, within bounds derived per element: outputs, final
// states and every gradient, both algorithms, every decay layout, gentle decays (the chunks whose
// decays factor out) and strong ones (the sub-blocks), lengths around the chunk of 64, widths
// around the 64-channel tiles. Without a GPU every test skips.
//
// The bound. Let u = 2^-8, bfloat16's unit roundoff, and |x|-scan the scan of |q|, |k|, |v|, |s0|
// with the same decays and cotangents |dout|, |dfinal|: each of its results is the sum of the
// magnitudes of the terms the true result sums (every term of the recurrence is a product of
// inputs and decay factors in (0, 1]).
//   * The chunked kernels round each product's operands to bfloat16 (relative error u each) and
//     accumulate in float32. The longest chain of roundings a term meets is five: the two operands
//     of a score (q.k or dout.v), the score itself as an operand of the next product, that
//     product's other operand, and the bfloat16 output (o, dq, dk, dv). A term's relative error is
//     then at most (1 + u)^5 - 1 < 6u, so |GPU - exact| <= 6u |x|-scan, plus float32's sums
//     (relative 2^-24 per addition, a few hundred additions deep: under 2^-14).
//   * The sequential kernels compute in float32: only the output's rounding, u.
//   * A decay's gradient (chunked_scan_kernels.cuh: "The decay gradients") sums, for position t,
//     q_u dq~_u - k_u dk~_u over u >= t, k_s dk^state_s over s < t and a state term made of the
//     same pairs: each of those is a term of q_u dq_u or k_s dk_s, so its error is at most the
//     same relative bound times sum_{u >= t} (|q_u| |dq|_u + |k_u| |dk|_u) + sum_{s < t} |k_s| |dk|_s
//     (|dq|, |dk| from the |x|-scan; for gv, do o and v dv), summed over the channels of a step's
//     scalar decay.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tests/cuda/parity.h"
#include "tests/nn/scan_inputs.h"
#include "tests/tensor/bf16_cases.h"

namespace linea::testing {
namespace {

const double kUnit = std::ldexp(1.0, -8);          // bfloat16's unit roundoff
const double kFloat32Sums = std::ldexp(1.0, -14);  // float32 sums of up to ~1000 terms

double relative_bound(ScanAlgorithm algorithm) {
  return (algorithm == ScanAlgorithm::Chunked ? 6 * kUnit : kUnit) + kFloat32Sums;
}

struct Case {
  Decay key, value;
  ScanShape shape;
  bool initial_state;
  bool gentle;  // decays that factor out of the chunk's products (chunked_scan_kernels.cuh)
};

std::string label(const Case& c, ScanAlgorithm a) {
  auto name = [](Decay d) { return d == Decay::None ? "none" : d == Decay::Scalar ? "step" : "channel"; };
  std::ostringstream os;
  os << (a == ScanAlgorithm::Chunked ? std::string("chunked, ") + scan_state_pass_name() : "sequential")
     << " B=" << c.shape.B << " H=" << c.shape.H << " T=" << c.shape.T << " dk=" << c.shape.dk << " dv=" << c.shape.dv
     << " gk=" << name(c.key) << " gv=" << name(c.value) << (c.initial_state ? " s0" : "")
     << (c.gentle ? " gentle" : " strong");
  return os.str();
}

Tensor gentle_log_decay(const Shape& shape, Generator& gen) { return uniform(shape, -0.03, -0.001, kFloat64, &gen); }

// The bound on a decay's gradient (see the file's header) from the |x|-scan's gradients of the
// contracted side's inputs: x (q or dout) with |dx|, y (k or v) with |dy|; (B, H, T, width), summed
// to (B, H, T, 1) for a scalar decay.
Tensor decay_gradient_bound(const Tensor& x, const Tensor& dx, const Tensor& y, const Tensor& dy, int64_t width) {
  const Tensor later = x * dx + y * dy, earlier = y * dy;
  const Tensor bound = cumsum(later, 2, /*reverse=*/true) + cumsum(earlier, 2);
  return width == 1 ? sum(bound, {3}, /*keepdim=*/true) : bound;
}

void expect_within_bounds(const Case& c, ScanAlgorithm algorithm, uint64_t seed) {
  const ScanInputs x64 = draw_scan_inputs(c.key, c.value, c.initial_state, c.shape, kFloat64, seed,
                                          c.gentle ? LogDecayDraw(gentle_log_decay) : default_log_decay);
  const ScanInputs gpu_in = bfloat16_scan_inputs(x64, gpu());
  const ScanInputs exact_in = widened_scan_inputs(gpu_in), magnitude_in = widened_scan_inputs(gpu_in, true);
  Generator gen(seed + 1);
  const ScanShape& s = c.shape;
  const Tensor dout = to(to(randn({s.B, s.H, s.T, s.dv}, kFloat32, &gen), kBFloat16), kFloat64);
  const Tensor dfinal = to(randn({s.B, s.H, s.dv, s.dk}, kFloat32, &gen), kFloat64);

  const std::vector<Tensor> got = scan_results(gpu_in, dout, dfinal, algorithm);
  const std::vector<Tensor> exact = scan_results(exact_in, dout, dfinal, algorithm);
  const std::vector<Tensor> mag = scan_results(magnitude_in, abs(dout), abs(dfinal), algorithm);
  // mag: o, S_T, dq, dk, dv, then the decays' and the initial state's gradients where defined.
  const Tensor &q = magnitude_in.q, &k = magnitude_in.k, &v = magnitude_in.v;
  std::vector<Tensor> bound = {mag[0], mag[1], mag[2], mag[3], mag[4]};
  if (c.key != Decay::None) bound.push_back(decay_gradient_bound(q, mag[2], k, mag[3], x64.gk.size(3)));
  if (c.value != Decay::None) bound.push_back(decay_gradient_bound(abs(dout), mag[0], v, mag[4], x64.gv.size(3)));
  if (c.initial_state) bound.push_back(mag.back());
  ASSERT_EQ(bound.size(), got.size());
  const char* names[] = {"o", "S_T", "dq", "dk", "dv"};
  for (size_t i = 0; i < got.size(); ++i) {
    const Tensor limit = detach(bound[i]) * relative_bound(algorithm);
    EXPECT_TRUE(within_bound(got[i], exact[i], limit))
        << label(c, algorithm) << ": " << (i < 5 ? names[i] : "a decay's or the initial state's gradient");
  }
}

TEST(CudaGatedScanBFloat16, WithinTheDerivedBoundsOfTheFloat64Scan) {
  LINEA_SKIP_WITHOUT_CUDA();
  const std::pair<Decay, Decay> layouts[] = {{Decay::None, Decay::None},         {Decay::Scalar, Decay::None},
                                             {Decay::PerChannel, Decay::None},   {Decay::Scalar, Decay::PerChannel},
                                             {Decay::PerChannel, Decay::PerChannel}, {Decay::None, Decay::Scalar},
                                             {Decay::PerChannel, Decay::Scalar}};
  const int64_t steps[] = {17, 64, 65, 300};
  const std::pair<int64_t, int64_t> widths[] = {{16, 16}, {48, 48}, {64, 64}, {100, 100}, {33, 7}, {130, 40}};
  uint64_t seed = 500;
  size_t w = 0;
  for (const auto& [key, value] : layouts)
    for (const int64_t t : steps)
      for (const bool gentle : {true, false}) {
        const auto [dk, dv] = widths[w++ % std::size(widths)];
        const Case c{key, value, {2, 2, t, dk, dv}, w % 3 == 0, gentle};
        expect_within_bounds(c, ScanAlgorithm::Sequential, seed += 10);
        for (const NamedScanStatePass& pass : kScanStatePasses) {
          const ScanStatePassSetting state_pass(pass.pass);
          expect_within_bounds(c, ScanAlgorithm::Chunked, seed += 10);
        }
      }
}

// The one-sided gates' chained kernels run persistent blocks (chunked_scan_kernels.cuh:
// for_block_chunk), here 1 or 3 of them, so that each block takes many chunks; a bfloat16 scan's
// tiles land through registers (NarrowPiece) in every chunk.
TEST(CudaGatedScanBFloat16, PersistentBlocksWithinTheBounds) {
  LINEA_SKIP_WITHOUT_CUDA();
  const ScanStatePassSetting chain(cuda::ScanStatePass::kChain);
  uint64_t seed = 900;
  for (const int blocks : {1, 3}) {
    const ScanPersistentBlocksSetting most(blocks);
    for (const auto& [key, value] : {std::pair{Decay::PerChannel, Decay::None}, std::pair{Decay::None, Decay::Scalar}})
      expect_within_bounds({key, value, {2, 2, 300, 64, 48}, blocks == 1, blocks == 3}, ScanAlgorithm::Chunked,
                           seed += 10);
  }
}

TEST(CudaGatedScanBFloat16, LongSequenceWithinTheBounds) {
  LINEA_SKIP_WITHOUT_CUDA();
  // ReGLA's layout (a key decay per step, a value decay per channel) over 32 chunks.
  for (const NamedScanStatePass& pass : kScanStatePasses) {
    const ScanStatePassSetting state_pass(pass.pass);
    expect_within_bounds({Decay::Scalar, Decay::PerChannel, {1, 2, 2048, 64, 64}, true, true}, ScanAlgorithm::Chunked,
                         7);
  }
}

// x's values (bfloat16, on the GPU) as a leaf that requires grad, laid out as the kernels meet
// them: the layers' (B, T, H, d) projections seen as (B, H, T, d) (rows read 16 bytes at a time,
// `heads_last`), or contiguous but one element past a 16-byte boundary (read element by element).
Tensor laid_out(const Tensor& x, bool heads_last) {
  Tensor out;
  if (heads_last) {
    out = transpose(contiguous(transpose(detach(x), 1, 2)), 1, 2);
  } else {
    out = reshape(narrow(zeros({x.numel() + 1}, {x.dtype(), x.device()}), 0, 1, x.numel()), x.shape());
    copy_(out, detach(x));
  }
  return out.requires_grad_();
}

// The chunked kernels read bfloat16 q, k, v in place (cuda/kernels/chunked_scan_kernels.cuh:
// Operand) in every layout, and write o, dq, dk, dv in place: strided and off-boundary inputs give
// the bits of contiguous ones, at widths that fill a 16-byte piece, widths that do not (read
// element by element), and widths past one 64-channel tile (partial sums added, then rounded).
TEST(CudaGatedScanBFloat16, ReadsEveryLayoutInPlace) {
  LINEA_SKIP_WITHOUT_CUDA();
  uint64_t seed = 900;
  for (const NamedScanStatePass& pass : kScanStatePasses)
    for (const auto& [dk, dv] : {std::pair<int64_t, int64_t>{64, 64}, {36, 20}, {100, 72}})
      for (const bool heads_last : {true, false}) {
        const ScanStatePassSetting state_pass(pass.pass);
        const ScanShape shape{2, 3, 130, dk, dv};
        const ScanInputs x64 = draw_scan_inputs(Decay::Scalar, Decay::PerChannel, true, shape, kFloat64, seed += 10);
        const ScanInputs packed = bfloat16_scan_inputs(x64, gpu());
        ScanInputs laid = bfloat16_scan_inputs(x64, gpu());
        laid.q = laid_out(packed.q, heads_last);
        laid.k = laid_out(packed.k, heads_last);
        laid.v = laid_out(packed.v, heads_last);
        ASSERT_EQ(laid.q.is_contiguous(), !heads_last);
        Generator gen(seed + 1);
        const Tensor dout = to(to(randn({shape.B, shape.H, shape.T, dv}, kFloat32, &gen), kBFloat16), kFloat64);
        const Tensor dfinal = to(randn({shape.B, shape.H, dv, dk}, kFloat32, &gen), kFloat64);
        const std::vector<Tensor> want = scan_results(packed, dout, dfinal, ScanAlgorithm::Chunked);
        const std::vector<Tensor> got = scan_results(laid, dout, dfinal, ScanAlgorithm::Chunked);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_EQ(max_abs_diff(got[i], want[i]), 0.0)
              << "result " << i << " at dk=" << dk << " dv=" << dv << (heads_last ? " heads last" : " off boundary")
              << ", " << pass.name;
      }
}

// The chunked kernels' products ran in bfloat16: the final state (float32, never rounded as a
// whole) differs from the exact one by more than TF32's unit roundoff (2^-11) of its largest
// value, as products with operands rounded to 8 significant bits do, and float32 or TF32 ones do
// not.
TEST(CudaGatedScanBFloat16, TheChunkedProductsRoundToBFloat16) {
  LINEA_SKIP_WITHOUT_CUDA();
  const ScanInputs x64 =
      draw_scan_inputs(Decay::PerChannel, Decay::PerChannel, false, {2, 2, 300, 64, 64}, kFloat64, 11);
  const ScanInputs gpu_in = bfloat16_scan_inputs(x64, gpu());
  const ScanResult got = gated_linear_scan_with_state(gpu_in.q, gpu_in.k, gpu_in.v, gpu_in.gk, gpu_in.gv);
  const ScanInputs e = widened_scan_inputs(gpu_in);
  const ScanResult exact = gated_linear_scan_with_state(e.q, e.k, e.v, e.gk, e.gv);
  const double relative =
      max_abs_diff(to(to(got.final_state, kCPU), kFloat64), exact.final_state) / max(abs(exact.final_state)).item();
  std::printf("[bf16] chunked scan's final state: %.2e of the largest value from the exact one\n", relative);
  EXPECT_GT(relative, std::ldexp(1.0, -11));
  EXPECT_LT(relative, 6 * kUnit);
}

}  // namespace
}  // namespace linea::testing
