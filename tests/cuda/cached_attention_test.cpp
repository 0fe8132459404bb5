// The CUDA cached_attention_step (cuda/kernels/cached_attention.cu) against the CPU kernel, its
// oracle: the output, the whole cache after the write, and the advanced positions, at awkward
// head dims (up to the kernel's 256), caches of 1 to a few thousand columns (so from one split to
// many, and a split holding only the new column), rows at different positions with some wrapped
// around the ring, grouped queries, partial and no rotation, and a row past the RoPE tables.
// Then several steps in a row, each reading what the previous one wrote, read back after each
// step and queued back to back; and cached keys of NaN, which make their rows NaN wherever they
// fall among the splits.
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

}  // namespace
}  // namespace linea::testing
