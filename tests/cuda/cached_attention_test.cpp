// The CUDA cached_attention_step (cuda/kernels/cached_attention.cu) against the CPU kernel, its
// oracle: the output, the whole cache after the write, and the advanced positions, at awkward
// head dims (up to the kernel's 256), caches of 1 to a few thousand columns (so from one split to
// many, and a split holding only the new column), rows at different positions with some wrapped
// around the ring, grouped queries, partial and no rotation, and a row past the RoPE tables.
// Then several steps in a row, each reading what the previous one wrote, read back after each
// step and queued back to back; and cached keys of NaN, which make their rows NaN wherever they
// fall among the splits. cached_attention_projected likewise, against the CPU's step and product:
// at batch 1 in float32 the product merges the splits (cuda/kernels/attention_splits.h), else the
// two run one after the other; both ways are covered.
#include <cmath>
#include <vector>

#include "tests/cuda/parity.h"
#include "tests/nn/cached_attention_inputs.h"

namespace linea::testing {
namespace {

constexpr int64_t kTable = 5000;

struct Case {
  int64_t batch, heads, kv_heads, dh, half, columns;
  std::vector<int64_t> positions;
};

// The case's inputs on the CPU and, a copy, on the GPU.
struct OnBoth {
  CachedAttentionInputs cpu, cuda;
};

CachedAttentionInputs to_device(const CachedAttentionInputs& in, Device d) {
  auto move = [&](const Tensor& t) { return t.defined() ? clone(to(t, d)) : t; };
  return {move(in.q), move(in.k), move(in.v), move(in.cos), move(in.sin), move(in.cache_k), move(in.cache_v),
          move(in.positions)};
}

OnBoth draw(const Case& c, DType dtype, Generator& gen) {
  const CachedAttentionInputs in =
      draw_cached_attention({c.batch, c.heads, c.kv_heads, c.dh, c.half, c.columns, kTable, c.positions}, dtype, gen);
  return {to_device(in, kCPU), to_device(in, gpu())};
}

// The whole cache after the writes, and the advanced positions.
void expect_same_state(const CachedAttentionInputs& cpu, const CachedAttentionInputs& cuda, const std::string& name) {
  EXPECT_TRUE(matches_cpu(cuda.cache_k, cpu.cache_k)) << name << ": cache_k";
  EXPECT_TRUE(same_values(cuda.cache_v, cpu.cache_v)) << name << ": cache_v";
  EXPECT_EQ(to(cuda.positions, kCPU).to_vector<int64_t>(), cpu.positions.to_vector<int64_t>()) << name;
}

void expect_same_step(CachedAttentionInputs& cpu, CachedAttentionInputs& cuda, const std::string& name) {
  const Tensor want = run_cached_attention(cpu), got = run_cached_attention(cuda);
  EXPECT_TRUE(matches_cpu(got, want)) << name << ": out";
  expect_same_state(cpu, cuda, name);
}

TEST(CachedAttentionCuda, MatchesTheCpuKernel) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  const std::vector<Case> cases = {
      {3, 4, 2, 5, 2, 17, {0, 16, 40}},          // odd head dim, one row wrapped
      {1, 8, 8, 64, 32, 2100, {2047}},            // the standard head, a long cache, many splits
      {2, 6, 3, 100, 0, 300, {299, 35}},           // no rotation, a split holding only the new column
      {2, 2, 1, 256, 64, 1, {7, 0}},               // the largest head, one column
      {4, 4, 4, 48, 24, 64, {63, 64, 65, 5000}},   // either side of the capacity; the last past the table
  };
  for (DType dtype : {kFloat32, kFloat64}) {
    Generator gen(17);
    for (size_t i = 0; i < cases.size(); ++i) {
      OnBoth in = draw(cases[i], dtype, gen);
      expect_same_step(in.cpu, in.cuda, "case " + std::to_string(i) + " " + dtype_name(dtype));
    }
  }
}

TEST(CachedAttentionCuda, StepsInARowReadWhatTheyWrote) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  Generator gen(23);
  const Case c{2, 4, 2, 64, 16, 40, {0, 9}};
  OnBoth in = draw(c, kFloat32, gen);
  CachedAttentionInputs &cpu = in.cpu, &cuda = in.cuda;
  for (int step = 0; step < 50; ++step) {  // row 1 wraps around the 40 columns
    expect_same_step(cpu, cuda, "step " + std::to_string(step));
    const Tensor k = randn(cpu.k.shape(), kFloat32, &gen), v = randn(cpu.v.shape(), kFloat32, &gen);
    const Tensor q = randn(cpu.q.shape(), kFloat32, &gen);
    cpu.k = k, cpu.v = v, cpu.q = q;
    cuda.k = to(k, gpu()), cuda.v = to(v, gpu()), cuda.q = to(q, gpu());
  }
}

TEST(CachedAttentionCuda, StepsQueuedBackToBack) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  // The same q, k and v stepped 30 times with nothing read back in between: each step's split
  // kernel follows the previous step's merge, which advances the positions it guessed before its
  // wait (cuda/kernels/cached_attention.cu), so a stale guess must be caught and the loads redone.
  Generator gen(29);
  OnBoth in = draw({2, 4, 2, 64, 16, 600, {3, 250}}, kFloat32, gen);
  std::vector<Tensor> want, got;
  for (int step = 0; step < 30; ++step) {
    want.push_back(run_cached_attention(in.cpu));
    got.push_back(run_cached_attention(in.cuda));
  }
  for (int step = 0; step < 30; ++step) EXPECT_TRUE(matches_cpu(got[step], want[step])) << "step " << step;
  expect_same_state(in.cpu, in.cuda, "after 30 steps");
}

TEST(CachedAttentionCuda, NaNKeysMakeTheirRowsNaN) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  // Row 0's keys are NaN over a whole split's worth of columns (every score of that split and of
  // its warps NaN), row 1's at one column: both rows NaN, as on the CPU; row 2 untouched.
  Generator gen(37);
  OnBoth in = draw({3, 2, 1, 64, 16, 2100, {2000, 2000, 2000}}, kFloat32, gen);
  for (CachedAttentionInputs* side : {&in.cpu, &in.cuda}) {
    Tensor split_of_row_0 = narrow(narrow(side->cache_k, 0, 0, 1), 2, 300, 200);
    Tensor column_of_row_1 = narrow(narrow(side->cache_k, 0, 1, 1), 2, 1000, 1);
    copy_(split_of_row_0, full({1}, NAN, kFloat32));
    copy_(column_of_row_1, full({1}, NAN, kFloat32));
  }
  const Tensor want = run_cached_attention(in.cpu), got = run_cached_attention(in.cuda);
  const std::vector<double> rows = want.to_vector<double>();  // (3, 2, 64)
  EXPECT_TRUE(std::isnan(rows[0]) && std::isnan(rows[128]) && !std::isnan(rows[256]));
  EXPECT_TRUE(matches_cpu(got, want));
  expect_same_state(in.cpu, in.cuda, "NaN keys");
}

// The projected output is a product of H dh terms after the attention: its rounding grows with the
// square root of their number, as in tests/cuda/fused_linear_test.cpp.
double projected_tolerance(DType dtype, int64_t width) {
  return (dtype == kFloat64 ? 1e-12 : 2e-6) * (1.0 + std::sqrt(static_cast<double>(width)));
}

struct ProjectedCase {
  Case step;
  int64_t outputs;
  bool bias, residual;
};

// The projected step on both devices, with the same projection.
void expect_same_projected(OnBoth& in, const ProjectedCase& c, DType dtype, Generator& gen, const std::string& name) {
  const AttentionProjection cpu = draw_projection(c.step.batch, c.step.heads * c.step.dh, c.outputs, c.bias, c.residual, dtype, gen);
  auto move = [](const Tensor& t) { return t.defined() ? to(t, gpu()) : t; };
  const AttentionProjection cuda{move(cpu.weight), move(cpu.bias), move(cpu.residual)};
  const Tensor want = run_projected(in.cpu, cpu), got = run_projected(in.cuda, cuda);
  const double tol = projected_tolerance(dtype, c.step.heads * c.step.dh);
  EXPECT_TRUE(matches_cpu(got, want, tol, tol)) << name << ": out";
  expect_same_state(in.cpu, in.cuda, name);
}

TEST(CachedAttentionCuda, ProjectedMatchesTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  // At batch 1 in float32 the first four merge in the product; the fifth's row of 21 values is not
  // a whole number of 16-byte loads, the sixth has more splits than a product merges (63 of 64
  // columns each on any GPU of more than 40 SMs), and batch 2 runs the merge kernel, batch 6 too
  // and then the composite product.
  const std::vector<ProjectedCase> cases = {
      {{1, 8, 8, 64, 32, 2100, {2047}}, 512, true, true},  // the standard head, 33 splits
      {{1, 8, 2, 48, 24, 300, {400}}, 96, false, true},     // grouped, wrapped around the ring
      {{1, 4, 4, 5, 2, 17, {3}}, 9, true, false},           // odd head dim and output count
      {{1, 4, 4, 48, 24, 64, {5000}}, 40, true, true},      // past the RoPE tables: NaN
      {{1, 3, 3, 7, 0, 40, {12}}, 10, true, true},          // no rotation, rows not 16-byte loads
      {{1, 8, 8, 64, 32, 4000, {3999}}, 64, true, true},    // too many splits to merge in the product
      {{2, 4, 2, 64, 16, 600, {3, 250}}, 33, true, true},   // two rows
      {{6, 4, 2, 16, 8, 50, {0, 10, 20, 30, 40, 49}}, 24, true, true},  // six: a cuBLAS product
  };
  const Tf32Setting exact(false);  // (the product of more than 4 rows is cuBLAS's)
  for (DType dtype : {kFloat32, kFloat64}) {
    Generator gen(41);
    for (size_t i = 0; i < cases.size(); ++i) {
      OnBoth in = draw(cases[i].step, dtype, gen);
      expect_same_projected(in, cases[i], dtype, gen, "case " + std::to_string(i) + " " + dtype_name(dtype));
    }
  }
}

TEST(CachedAttentionCuda, ProjectedStepsQueuedBackToBack) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  // As StepsQueuedBackToBack, with the product advancing the position: each step's split kernel
  // follows the product of the step before, whose position it guessed before its wait.
  Generator gen(43);
  const Case c{1, 8, 8, 64, 32, 300, {250}};  // 5 splits at first, wrapping around the ring
  OnBoth in = draw(c, kFloat32, gen);
  const AttentionProjection cpu = draw_projection(c.batch, c.heads * c.dh, 512, true, true, kFloat32, gen);
  const AttentionProjection cuda{to(cpu.weight, gpu()), to(cpu.bias, gpu()), to(cpu.residual, gpu())};
  std::vector<Tensor> want, got;
  for (int step = 0; step < 80; ++step) {
    want.push_back(run_projected(in.cpu, cpu));
    got.push_back(run_projected(in.cuda, cuda));
  }
  const double tol = projected_tolerance(kFloat32, c.heads * c.dh);
  for (int step = 0; step < 80; ++step) EXPECT_TRUE(matches_cpu(got[step], want[step], tol, tol)) << "step " << step;
  expect_same_state(in.cpu, in.cuda, "after 80 steps");
}

}  // namespace
}  // namespace linea::testing
