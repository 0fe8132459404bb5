// The CUDA gated scan (cuda/kernels/gated_scan.cu) against the CPU kernel, through
// gated_linear_scan_with_state: outputs, final states and every gradient, float32 and float64,
// over every decay layout and awkward sizes (key dims that are not multiples of 32, value dims
// that need one or several row slices per sequence, lengths around the tiles and checkpoints);
// strided inputs, a long sequence, determinism, and the key-dim limit. Without a GPU every test
// skips.
#include <sstream>

#include "tests/cuda/fused_parity.h"

namespace linea::testing {
namespace {

// Sums over up to a few hundred steps and 256 channels in float32, in other orders than the CPU's.
Tolerance scan_tolerance(DType dtype) { return dtype == kFloat64 ? Tolerance{1e-10, 1e-11} : Tolerance{2e-4, 2e-4}; }

struct Case {
  int64_t batch, heads, steps, dk, dv;
  int64_t gk_width, gv_width;  // 0: none; 1: one per step; else per channel (dk / dv)
  bool initial_state;
};

std::string label(const Case& c, DType dtype) {
  std::ostringstream os;
  os << dtype_name(dtype) << " B=" << c.batch << " H=" << c.heads << " T=" << c.steps << " dk=" << c.dk
     << " dv=" << c.dv << " gk=" << c.gk_width << " gv=" << c.gv_width << (c.initial_state ? " s0" : "");
  return os.str();
}

// Log decays between exp(-1.5) and almost 1, and q, k, v, s0 normal; in the order the function
// below reads them.
std::vector<Tensor> draw(const Case& c, DType dtype, uint64_t seed) {
  std::vector<Tensor> x = {random_normal({c.batch, c.heads, c.steps, c.dk}, dtype, seed),
                           random_normal({c.batch, c.heads, c.steps, c.dk}, dtype, seed + 1),
                           random_normal({c.batch, c.heads, c.steps, c.dv}, dtype, seed + 2)};
  Generator gen(seed + 3);
  for (int64_t width : {c.gk_width, c.gv_width})
    if (width > 0) x.push_back(to(uniform({c.batch, c.heads, c.steps, width}, -1.5, -0.001, kFloat64, &gen), dtype));
  if (c.initial_state) x.push_back(random_normal({c.batch, c.heads, c.dv, c.dk}, dtype, seed + 4));
  return x;
}

// o and S_T, flattened into one tensor, so that one cotangent checks both and all gradients.
DeviceFn scan_of(const Case& c) {
  return [c](const std::vector<Tensor>& x) {
    size_t next = 3;
    const Tensor gk = c.gk_width > 0 ? x[next++] : Tensor();
    const Tensor gv = c.gv_width > 0 ? x[next++] : Tensor();
    const Tensor s0 = c.initial_state ? x[next] : Tensor();
    const ScanResult r = gated_linear_scan_with_state(x[0], x[1], x[2], gk, gv, s0);
    return cat({flatten(r.out), flatten(r.final_state)}, 0);
  };
}

const Case kCases[] = {
    {1, 1, 1, 1, 1, 0, 0, false},       // one step, one channel
    {2, 3, 7, 5, 3, 5, 3, true},        // under one tile
    {1, 2, 70, 33, 17, 33, 1, true},    // dk just over a warp; scalar value decay
    {2, 2, 65, 64, 64, 1, 64, false},   // scalar key decay, per-channel value decay
    {1, 1, 130, 100, 100, 100, 0, true},  // dv over one block's rows: several slices
    {1, 2, 37, 128, 129, 128, 129, true},  // dv one past a multiple of 32 (sum normalization's +1)
    {3, 4, 100, 32, 33, 0, 33, false},  // ReGLA's shape: value decay, dv = head dim + 1
    {1, 1, 64, 200, 8, 200, 8, true},   // dk 200 (7 columns per lane, padded to 8)
    {1, 1, 50, 256, 40, 1, 1, true},    // dk at the limit, both decays scalar
    {8, 4, 33, 16, 16, 16, 16, true},   // many sequences: one slice each
    {1, 1, 300, 8, 300, 8, 300, true},  // dv 300: more slices than the backward's usual cap
    {2, 1, 90, 1, 64, 0, 64, true},     // dk = 1: the linear recurrence's shape
};

TEST(CudaGatedScan, MatchesCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  uint64_t seed = 1;
  for (DType dtype : {kFloat64, kFloat32})
    for (const Case& c : kCases)
      expect_device_parity(scan_of(c), draw(c, dtype, seed += 10), scan_tolerance(dtype), label(c, dtype));
}

TEST(CudaGatedScan, ExtremeDecays) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : {kFloat64, kFloat32})
    for (double g : {-20.0, -1e-6}) {
      const Case c{2, 2, 80, 24, 20, 24, 20, true};
      std::vector<Tensor> x = draw(c, dtype, 40);
      x[3] = full(x[3].shape(), g, {dtype, kCPU});
      x[4] = full(x[4].shape(), g, {dtype, kCPU});
      // Without decay the state sums 80 steps: outputs of ~50 whose float32 sums, reordered, differ
      // by a few ulps of that scale, which is more than 2e-4 absolute where an output is near 0.
      const Tolerance tol = dtype == kFloat64 ? scan_tolerance(dtype) : Tolerance{2e-4, 2e-3};
      expect_device_parity(scan_of(c), x, tol, label(c, dtype) + " decays " + std::to_string(g));
    }
}

TEST(CudaGatedScan, StridedInputs) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : {kFloat64, kFloat32}) {
    // The layers' layout: (B, T, H, d) transposed to (B, H, T, d).
    Generator gen(5);
    const std::vector<Tensor> x = {random_normal({2, 45, 3, 20}, dtype, 6), random_normal({2, 45, 3, 20}, dtype, 7),
                                   random_normal({2, 45, 3, 12}, dtype, 8),
                                   to(uniform({2, 45, 3, 12}, -1, -0.01, kFloat64, &gen), dtype)};
    expect_device_parity(
        [](const std::vector<Tensor>& t) {
          return gated_linear_scan(transpose(t[0], 1, 2), transpose(t[1], 1, 2), transpose(t[2], 1, 2), Tensor(),
                                   transpose(t[3], 1, 2));
        },
        x, scan_tolerance(dtype), std::string("heads-last layout ") + dtype_name(dtype));
  }
}

// A long sequence: checkpoints every ~sqrt(T) steps, many of them.
TEST(CudaGatedScan, LongSequence) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Case c{1, 2, 3000, 32, 32, 32, 32, true};
  expect_device_parity(scan_of(c), draw(c, kFloat64, 50), scan_tolerance(kFloat64), label(c, kFloat64));
}

// Row slices write partial sums that a second kernel adds in slice order: no atomics, so two
// backward passes agree bit for bit.
TEST(CudaGatedScan, BackwardIsDeterministic) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Case c{1, 2, 200, 64, 128, 64, 128, true};
  std::vector<Tensor> x;
  for (const Tensor& e : draw(c, kFloat32, 60)) {
    Tensor g = on_gpu(e);
    x.push_back(g.requires_grad_(true));
  }
  const DeviceFn f = scan_of(c);
  const Tensor y = f(x);
  const Tensor u = on_gpu(random_normal(y.shape(), kFloat32, 61));
  const auto first = grad(f(x), x, u);
  const auto second = grad(f(x), x, u);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_TRUE(same_values(first[i], second[i])) << "input " << i;
}

TEST(CudaGatedScan, RejectsKeyDimAbove256) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor q = on_gpu(random_normal({1, 1, 4, 300}, kFloat32, 70));
  const Tensor v = on_gpu(random_normal({1, 1, 4, 8}, kFloat32, 71));
  EXPECT_LINEA_ERROR(gated_linear_scan(q, q, v, Tensor(), Tensor()), "gated_scan", "key dims up to 256, got dk = 300");
}

}  // namespace
}  // namespace linea::testing
