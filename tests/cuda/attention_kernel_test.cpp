// The FlashAttention-style CUDA kernels against the CPU oracle, through
// scaled_dot_product_attention: the exact kernels (cuda/kernels/attention.cu: float64, and float32
// with TF32 off) and the TF32 tensor-core kernels (attention_tf32.cu: float32 with TF32 on, the
// default); forward and all three gradients,
// over grouped-query heads, windows, fewer queries than keys, decoding, head dims that are not
// powers of two, sequence lengths that are not multiples of the tiles, strided inputs; long
// sequences (4k, 16k) checked on their last rows; the composite formula on the GPU; determinism;
// bfloat16 on the tensor-core kernels.
// Without a GPU every test skips.
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "tests/cuda/fused_parity.h"

namespace linea::testing {
namespace {

// The precisions under test: float64, float32 exact (TF32 off) and float32 on the tensor cores.
struct Precision {
  DType dtype;
  bool tf32;
  std::string name() const {
    return dtype == kFloat64 ? "float64" : dtype == kBFloat16 ? "bfloat16" : tf32 ? "float32/TF32" : "float32";
  }
};
const Precision kPrecisions[] = {{kFloat64, false}, {kFloat32, false}, {kFloat32, true}};

// Exact kernels: sums over up to 1k keys and queries, scores over dh up to 128, elementwise. TF32
// rounds every product's inputs to 11 significant bits (relative error 2^-11 = 4.9e-4): the error
// of a result is then relative to the magnitudes summed into it, so it is measured against the
// tensor's largest value (4e-3 leaves room for sums of 1k terms), plus an absolute 6e-3 for
// gradients that cancel to zero (a row that sees one key has dq = dk = 0 exactly, yet keeps the
// rounding of do.v, about 1e-3 of |do| |v| times the scale).
//
// bfloat16 runs the tensor-core kernels (attention_tf32.cu: bfloat16 mma) and is compared with the
// CPU's float32 kernel on the widened inputs, rounded. The GPU rounds the probabilities and dS to
// bfloat16 before the second products (relative 2^-9 each, against TF32's 2^-11 for float32), an
// error relative to the magnitudes summed, as TF32's is: TF32's tolerance (of the largest value)
// plus a bfloat16 unit for those roundings and for each side's rounding of its outputs.
Tolerance attention_tolerance(const Precision& p) {
  if (p.dtype == kFloat64) return {1e-10, 1e-12};
  if (p.dtype == kBFloat16) return {4e-3 + std::ldexp(1.0, -7), 6e-3 + std::ldexp(1.0, -7), true};
  return p.tf32 ? Tolerance{4e-3, 6e-3, true} : Tolerance{5e-4, 5e-5};
}
const Precision kBFloat16Precision{kBFloat16, true};

struct Case {
  int64_t batch, heads, kv_heads, tq, tk, dh, window;
};

std::string label(const Case& c, const Precision& p) {
  std::ostringstream os;
  os << p.name() << " B=" << c.batch << " H=" << c.heads << " KV=" << c.kv_heads << " Tq=" << c.tq
     << " Tk=" << c.tk << " dh=" << c.dh << " window=" << c.window;
  return os.str();
}

std::vector<Tensor> draw(const Case& c, DType dtype, uint64_t seed) {
  return {random_normal({c.batch, c.heads, c.tq, c.dh}, dtype, seed),
          random_normal({c.batch, c.kv_heads, c.tk, c.dh}, dtype, seed + 1),
          random_normal({c.batch, c.kv_heads, c.tk, c.dh}, dtype, seed + 2)};
}

// The inputs of draw() as GPU leaves that require grad.
std::vector<Tensor> gpu_leaves(const std::vector<Tensor>& cpu) {
  std::vector<Tensor> leaves;
  for (const Tensor& e : cpu) {
    Tensor g = on_gpu(e);
    leaves.push_back(g.requires_grad_(true));
  }
  return leaves;
}

DeviceFn attention_with(int64_t window) {
  return [window](const std::vector<Tensor>& x) { return scaled_dot_product_attention(x[0], x[1], x[2], window); };
}

const Case kCases[] = {
    {1, 1, 1, 1, 1, 4, 0},          // one position
    {2, 4, 2, 37, 37, 64, 0},       // GQA, T below one tile
    {1, 2, 2, 130, 130, 64, 0},     // T not a multiple of the tiles
    {1, 2, 1, 100, 100, 64, 17},    // multi-query, window inside tiles
    {2, 4, 4, 5, 100, 32, 0},       // fewer queries than keys
    {1, 4, 2, 45, 200, 64, 70},     // fewer queries, window
    {2, 2, 1, 1, 300, 64, 0},       // decoding one token
    {1, 2, 1, 1, 300, 64, 50},      // decoding with a window
    {1, 3, 3, 70, 70, 40, 0},       // dh not a power of two
    {1, 2, 1, 33, 33, 6, 3},        // tiny dh
    {1, 1, 1, 129, 129, 100, 0},    // dh 100 (padded to 128)
    {1, 2, 2, 65, 65, 128, 0},      // dh 128
    {1, 2, 2, 200, 200, 128, 64},   // dh 128 with a window of one tile
    {1, 2, 2, 1024, 1024, 64, 0},   // T = 1k, the benchmark head dim
    {2, 6, 2, 300, 300, 64, 1},     // window 1: each row sees itself only
};

TEST(CudaAttention, MatchesCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (const Precision& p : kPrecisions) {
    const Tf32Setting mode(p.tf32);
    for (const Case& c : kCases)
      expect_device_parity(attention_with(c.window), draw(c, p.dtype, 1), attention_tolerance(p), label(c, p));
  }
}

// bfloat16 (attention_tolerance says how it is compared). Its key tiles are double-buffered with
// cp.async where rows allow 16-byte copies (dh a multiple of 8): the cases cover both loaders.
TEST(CudaAttention, Bfloat16MatchesCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (const Case& c : kCases)
    expect_device_parity(attention_with(c.window), draw(c, kBFloat16, 1), attention_tolerance(kBFloat16Precision),
                         label(c, kBFloat16Precision));
}

TEST(CudaAttention, StridedInputs) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (const Precision& p : {kPrecisions[0], kPrecisions[1], kPrecisions[2], kBFloat16Precision}) {
    const Tf32Setting mode(p.tf32);
    const DType dtype = p.dtype;
    // The layer's layout: (B, T, heads, dh) transposed to (B, heads, T, dh); rows read in place.
    expect_device_parity(
        [](const std::vector<Tensor>& x) {
          return scaled_dot_product_attention(transpose(x[0], 1, 2), transpose(x[1], 1, 2), transpose(x[2], 1, 2), 9);
        },
        {random_normal({2, 77, 4, 64}, dtype, 2), random_normal({2, 77, 2, 64}, dtype, 3),
         random_normal({2, 77, 2, 64}, dtype, 4)},
        attention_tolerance(p), "heads-last layout " + p.name());
    // Head dims strided (from (B, H, dh, T)): copied to rows first.
    expect_device_parity(
        [](const std::vector<Tensor>& x) {
          return scaled_dot_product_attention(transpose(x[0], 2, 3), transpose(x[1], 2, 3), transpose(x[2], 2, 3));
        },
        {random_normal({1, 2, 32, 50}, dtype, 5), random_normal({1, 2, 32, 50}, dtype, 6),
         random_normal({1, 2, 32, 50}, dtype, 7)},
        attention_tolerance(p), "strided head dim " + p.name());
  }
}

// 4k and 16k positions run; checked on their last rows, where the CPU oracle is cheap: the
// forward's last R rows equal a call with only those R queries, and a gradient that is zero
// outside them gives that call's dk and dv (other rows' terms vanish) and its dq, zero elsewhere.
TEST(CudaAttention, LongSequencesMatchCpuOnTheLastRows) {
  LINEA_SKIP_WITHOUT_CUDA();
  const int64_t rows = 3;
  for (const Precision& p : {kPrecisions[1], kPrecisions[2], kBFloat16Precision})
    for (const auto& [t, window] : std::vector<std::pair<int64_t, int64_t>>{{4096, 0}, {16384, 0}, {16384, 1000}}) {
      SCOPED_TRACE(p.name() + " T=" + std::to_string(t) + " window=" + std::to_string(window));
      const Tf32Setting mode(p.tf32);
      const Case c{1, 4, 2, t, t, 64, window};
      const std::vector<Tensor> x = draw(c, p.dtype, 8);
      const std::vector<Tensor> gx = gpu_leaves(x);
      const Tensor out = scaled_dot_product_attention(gx[0], gx[1], gx[2], window);
      Tensor u_tail = random_normal({1, 4, rows, 64}, p.dtype, 9);
      const Tensor u = cat({zeros({1, 4, t - rows, 64}, p.dtype), u_tail}, 2);
      const auto g = grad(out, gx, on_gpu(u));

      std::vector<Tensor> cx = {narrow(x[0], 2, t - rows, rows), x[1], x[2]};
      for (Tensor& e : cx) e = clone(e).requires_grad_(true);
      const Tensor out_cpu = scaled_dot_product_attention(cx[0], cx[1], cx[2], window);
      const auto g_cpu = grad(out_cpu, cx, u_tail);
      const Tolerance tol = attention_tolerance(p);
      EXPECT_TRUE(within(narrow(out, 2, t - rows, rows), out_cpu, tol)) << "out";
      EXPECT_TRUE(within(narrow(g[0], 2, t - rows, rows), g_cpu[0], tol)) << "dq";
      EXPECT_EQ(max_abs_diff(to(narrow(g[0], 2, 0, t - rows), kCPU), zeros({1, 4, t - rows, 64}, p.dtype)), 0.0)
          << "dq elsewhere";
      EXPECT_TRUE(within(g[1], g_cpu[1], tol)) << "dk";
      EXPECT_TRUE(within(g[2], g_cpu[2], tol)) << "dv";
      EXPECT_TRUE(std::isfinite(sum(out).item()));
    }
}

// Decoding from a KV cache: one query against every cached key equals the full forward's last row.
TEST(CudaAttention, DecodingStepEqualsLastRow) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Case c{2, 8, 2, 700, 700, 64, 0};
  const std::vector<Tensor> x = draw(c, kFloat32, 10);
  const Tensor q = on_gpu(x[0]), k = on_gpu(x[1]), v = on_gpu(x[2]);
  for (bool tf32 : {false, true}) {
    const Tf32Setting mode(tf32);
    for (int64_t window : {0, 128}) {
      const Tensor full = scaled_dot_product_attention(q, k, v, window);
      const Tensor step = scaled_dot_product_attention(narrow(q, 2, 699, 1), k, v, window);
      EXPECT_LT(max_abs_diff(step, narrow(full, 2, 699, 1)), 1e-6) << "window " << window << " tf32 " << tf32;
    }
  }
}

// The composite formula (matmul, masked_fill, softmax, matmul) on the GPU agrees with the fused kernel.
TEST(CudaAttention, MatchesCompositeOnGpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoTf32 exact;  // the composite's matmuls in plain float32
  for (DType dtype : {kFloat64, kFloat32})
    for (int64_t window : {0, 50}) {
      const Case c{2, 4, 2, 200, 200, 64, window};
      const std::vector<Tensor> x = draw(c, dtype, 11);
      std::vector<bool> allowed(200 * 200);
      for (int64_t i = 0; i < 200; ++i)
        for (int64_t s = 0; s < 200; ++s) allowed[i * 200 + s] = s <= i && (window == 0 || s > i - window);
      const Tensor hidden = on_gpu(logical_not(from_vector(allowed, {200, 200})));
      const Tensor index = on_gpu(from_vector(std::vector<int64_t>{0, 0, 1, 1}, {4}));
      const Tensor q = on_gpu(x[0]), k = index_select(on_gpu(x[1]), 1, index), v = index_select(on_gpu(x[2]), 1, index);
      const Tensor scores = masked_fill(matmul(q, transpose(k, -1, -2)) * (1.0 / 8.0), hidden,
                                        -std::numeric_limits<double>::infinity());
      const Tensor composite = matmul(softmax(scores, -1), v);
      const Tensor fused = scaled_dot_product_attention(q, on_gpu(x[1]), on_gpu(x[2]), window);
      const Precision p{dtype, false};
      const Tolerance tol = attention_tolerance(p);
      EXPECT_TRUE(all_close(fused, composite, tol.rtol, tol.atol)) << label(c, p);
    }
}

// dk and dv are accumulated by the block that owns their key tile, dq by the block that owns its
// query tile: no atomics, so two backward passes agree bit for bit.
TEST(CudaAttention, BackwardIsDeterministic) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Case c{2, 8, 2, 300, 300, 64, 0};
  for (const Precision& p : {kPrecisions[1], kPrecisions[2], kBFloat16Precision}) {
    const Tf32Setting mode(p.tf32);
    const std::vector<Tensor> x = gpu_leaves(draw(c, p.dtype, 12));
    const Tensor u = on_gpu(random_normal({2, 8, 300, 64}, p.dtype, 13));
    const auto first = grad(scaled_dot_product_attention(x[0], x[1], x[2]), x, u);
    const auto second = grad(scaled_dot_product_attention(x[0], x[1], x[2]), x, u);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(same_values(first[i], second[i])) << "input " << i << " " << p.name();
  }
}

// The TF32 kernels differ from the exact ones by rounding alone: on the same inputs, never by more
// than TF32's tolerance, and by more than float32 rounding (they did run on the tensor cores).
TEST(CudaAttention, Tf32DiffersFromExactByRoundingOnly) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Case c{2, 4, 2, 333, 333, 64, 0};
  const std::vector<Tensor> x = gpu_leaves(draw(c, kFloat32, 15));
  const Tensor u = on_gpu(random_normal({2, 4, 333, 64}, kFloat32, 16));
  std::vector<std::vector<Tensor>> results;
  for (bool tf32 : {false, true}) {
    const Tf32Setting mode(tf32);
    const Tensor out = scaled_dot_product_attention(x[0], x[1], x[2]);
    std::vector<Tensor> r = grad(out, x, u);
    r.insert(r.begin(), detach(out));
    results.push_back(std::move(r));
  }
  const char* names[] = {"out", "dq", "dk", "dv"};
  for (int i = 0; i < 4; ++i) {
    const Tensor exact = to(results[0][i], kCPU), tf32 = to(results[1][i], kCPU);
    const double relative = max_abs_diff(exact, tf32) / max(abs(exact)).item();
    std::printf("[tf32] attention %s: largest difference %.2e of the largest value\n", names[i], relative);
    EXPECT_LT(relative, 2e-3) << names[i];
    EXPECT_GT(relative, 1e-6) << names[i];
  }
}

TEST(CudaAttention, RejectsHeadDimAbove128) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor q = on_gpu(random_normal({1, 1, 4, 160}, kFloat32, 14));
  EXPECT_LINEA_ERROR(scaled_dot_product_attention(q, q, q), "attention", "head dims up to 128, got 160");
}

}  // namespace
}  // namespace linea::testing
