// The CUDA fused_linear (cuda/kernels/fused_linear.cu) against the CPU kernel, its oracle: every
// norm and activation, gated and not, at awkward widths (1, odd ones that take the one-element
// loads, ones a 16-byte load divides), 1 to 4 input rows (one row held in registers: normed up to
// one batch wide, plain at any length, a plain row past a batch split among warps, a row of at
// most half a batch two outputs a warp at a time; up to 4 staged in shared memory), rows long
// enough to be staged in parts, a LayerNorm's input far from zero, weights that start off a
// 16-byte boundary, and, through the backend directly, more rows than one launch takes; more
// outputs than the grid has warps.
#include <string>
#include <vector>

#include "tests/cuda/parity.h"

namespace linea::testing {
namespace {

struct Case {
  int64_t rows, in, out;
  RowNorm norm = RowNorm::None;
  bool activate = false;
  UnaryOp activation = UnaryOp::GeluErf;
  bool bias = false, gated = false, residual = false;

  std::string name() const {
    return std::to_string(rows) + "x" + std::to_string(in) + "->" + std::to_string(out) + " norm " +
           std::to_string(static_cast<int>(norm)) + (activate ? " act " + std::to_string(static_cast<int>(activation)) : "") +
           (bias ? " bias" : "") + (gated ? " gated" : "") + (residual ? " residual" : "");
  }
  FusedLinearOptions options() const {
    return {.norm = norm, .norm_eps = 1e-5, .activate = activate, .activation = activation};
  }
};

// w's values in a contiguous tensor on `device` whose first element sits one element past its
// allocation's start: off every 16-byte boundary, so the kernel must take its one-element loads.
Tensor off_boundary(const Tensor& w, Device device) {
  Tensor shifted = reshape(narrow(zeros({w.numel() + 1}, {w.dtype(), device}), 0, 1, w.numel()), w.shape());
  copy_(shifted, w);
  return shifted;
}

FusedLinearInputs draw(const Case& c, DType dtype, Generator& gen) {
  const double w_scale = 1.0 / std::sqrt(static_cast<double>(c.in));
  FusedLinearInputs in;
  in.x = randn({c.rows, c.in}, dtype, &gen) * 1.5;
  in.weight = randn({c.out, c.in}, dtype, &gen) * w_scale;
  if (c.bias) in.bias = randn({c.out}, dtype, &gen);
  if (c.gated) {
    in.up_weight = randn({c.out, c.in}, dtype, &gen) * w_scale;
    if (c.bias) in.up_bias = randn({c.out}, dtype, &gen);
  }
  if (c.norm != RowNorm::None) in.norm_weight = randn({c.in}, dtype, &gen) * 0.3 + 1.0;
  if (c.norm == RowNorm::Layer) in.norm_bias = randn({c.in}, dtype, &gen) * 0.3;
  if (c.residual) in.residual = randn({c.rows, c.out}, dtype, &gen);
  return in;
}

FusedLinearInputs on_gpu(const FusedLinearInputs& in, bool misaligned) {
  auto move = [&](const Tensor& t) { return t.defined() ? to(t, gpu()) : t; };
  auto weights = [&](const Tensor& t) { return misaligned && t.defined() ? off_boundary(t, gpu()) : move(t); };
  return {.x = move(in.x), .weight = weights(in.weight), .bias = move(in.bias), .up_weight = weights(in.up_weight),
          .up_bias = move(in.up_bias), .norm_weight = move(in.norm_weight), .norm_bias = move(in.norm_bias),
          .residual = move(in.residual)};
}

// float32 products of `in` terms, summed in other orders on the two devices.
double tolerance(DType dtype, int64_t in) { return (dtype == kFloat64 ? 1e-12 : 2e-6) * (1.0 + std::sqrt(static_cast<double>(in))); }

void expect_parity(const Case& c, DType dtype, uint64_t seed, bool misaligned = false) {
  Generator gen(seed);
  const FusedLinearInputs cpu = draw(c, dtype, gen), cuda = on_gpu(cpu, misaligned);
  const Tensor want = fused_linear(cpu, c.options()), got = fused_linear(cuda, c.options());
  const double tol = tolerance(dtype, c.in);
  EXPECT_TRUE(matches_cpu(got, want, tol, tol)) << c.name() << (misaligned ? " misaligned" : "") << " "
                                                << dtype_name(dtype);
}

std::vector<Case> cases() {
  using enum UnaryOp;
  std::vector<Case> all;
  for (int64_t rows : {1, 2, 3, 4})
    for (auto [in, out] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 7}, {64, 33}, {130, 65}, {512, 513}}) {
      all.push_back({rows, in, out});
      all.push_back({rows, in, out, RowNorm::RMS, true, Silu, false, true, true});
      all.push_back({rows, in, out, RowNorm::Layer, true, GeluErf, true, false, false});
      all.push_back({rows, in, out, RowNorm::RMS, true, GeluTanh, true, false, true});
      all.push_back({rows, in, out, RowNorm::None, true, Relu, true, true, true});
    }
  // 5000 outputs are more than the grid has warps (one block of 16 warps per SM for a plain
  // product, up to 8 blocks of 4 for a gated one): some take two or more, with and without a
  // bias, gated and plain.
  for (int64_t out : {2100, 5000}) {
    all.push_back({1, 72, out, RowNorm::RMS, true, Silu, true, true, true});
    all.push_back({3, 130, out, RowNorm::Layer, false, GeluErf, false, false, true});
    all.push_back({2, 96, out, RowNorm::RMS, true, Relu, true, false, true});
  }
  return all;
}

TEST(FusedLinearCuda, MatchesTheCpuKernel) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  uint64_t seed = 1;
  for (DType dtype : {kFloat32, kFloat64})
    for (const Case& c : cases()) expect_parity(c, dtype, seed++);
}

TEST(FusedLinearCuda, LongRowsAreStagedInParts) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  // 4 rows of 5000 floats (or 3 of 2100 doubles, 1 of 20000 floats) are more than the 64 KiB the
  // kernel stages at once.
  expect_parity({4, 5000, 37, RowNorm::RMS, true, UnaryOp::Silu, true, true, true}, kFloat32, 50);
  expect_parity({3, 2100, 37, RowNorm::Layer, true, UnaryOp::GeluErf, true, false, true}, kFloat64, 51);
  expect_parity({1, 20000, 9, RowNorm::RMS}, kFloat32, 52);
}

TEST(FusedLinearCuda, NormParametersPastTheRegistersAreReadFromMemory) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  // Rows staged at once whose norm gains and shifts do not all fit the registers each thread
  // loads before the wait (4 channels a thread): past 2048 channels for a plain product's 512
  // threads, past 512 for a gated unit's 128; the rest are read from memory.
  expect_parity({1, 4100, 19, RowNorm::Layer, true, UnaryOp::Silu, true, false, true}, kFloat32, 55);
  expect_parity({1, 3000, 21, RowNorm::RMS, true, UnaryOp::GeluTanh, true, true, true}, kFloat32, 56);
  expect_parity({2, 1000, 13, RowNorm::Layer, true, UnaryOp::Relu, false, true, false}, kFloat64, 57);
}

TEST(FusedLinearCuda, OneRowHeldInRegisters) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  // One input row: its lanes hold the row (up to a batch: 1024 floats in 16-byte loads, 512
  // doubles, 256 elements one at a time), normed in registers by every warp; a normed row past a
  // batch is staged; a row without a norm is read a batch at a time beside the weights, any length.
  using enum UnaryOp;
  uint64_t seed = 120;
  for (DType dtype : {kFloat32, kFloat64})
    for (const Case& c : std::vector<Case>{{1, 1024, 300, RowNorm::RMS, true, Silu, true, false, true},
                                           {1, 1028, 77, RowNorm::RMS, true, GeluTanh, true},
                                           {1, 1028, 77},
                                           {1, 2048, 513, RowNorm::None, false, Relu, true, false, true},
                                           {1, 4100, 65, RowNorm::None, true, GeluErf, false, false, true},
                                           {1, 512, 8192, RowNorm::RMS},
                                           {1, 512, 1536, RowNorm::Layer, false, Relu, true, false, false},
                                           {1, 255, 40, RowNorm::Layer, true, Silu, true, false, true},
                                           {1, 257, 40, RowNorm::RMS},
                                           {1, 257, 40, RowNorm::None, true, Relu, true, false, true}})
      expect_parity(c, dtype, seed++);
  // A plain row staged whole in more than the 48 KiB of shared memory a launch gets by default
  // (15,000 floats), and one past the stage (17,000 floats: staged in parts by the other kernel).
  expect_parity({1, 15000, 30, RowNorm::None, true, Silu, true, false, true}, kFloat32, seed++);
  expect_parity({1, 17000, 30, RowNorm::None, false, Relu, true, false, true}, kFloat32, seed++);
}

TEST(FusedLinearCuda, OneRowSplitAcrossWarps) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  // A plain row longer than a batch is split into the fewest spans of at most a batch, one warp a
  // span, their sums added through shared memory (spans_per_row_log2): 2048 floats in 2 spans,
  // 4096 in 4, 3072 in 4 of 768, 2048 doubles in 4 of 512, 768 elements off a 16-byte boundary in
  // 4 of 192 (one-element loads, a batch of 256). Most leave warps without an output in the last
  // block, which still meet the barriers. 2000 outputs of 2048 floats are more than one pass of
  // the grid takes split, and go whole.
  using enum UnaryOp;
  expect_parity({1, 2048, 37, RowNorm::None, true, Silu, true, false, true}, kFloat32, 140);
  expect_parity({1, 4096, 101, RowNorm::None, false, Relu, true, false, true}, kFloat32, 141);
  expect_parity({1, 3072, 50, RowNorm::None, true, GeluTanh, false, false, true}, kFloat32, 142);
  expect_parity({1, 2048, 129, RowNorm::None, true, GeluErf, true, false, true}, kFloat64, 143);
  expect_parity({1, 768, 50, RowNorm::None, false, Relu, true, false, true}, kFloat32, 144, /*misaligned=*/true);
  expect_parity({1, 2048, 2000, RowNorm::None, false, Relu, true, false, true}, kFloat32, 145);
}

TEST(FusedLinearCuda, OneRowTwoOutputsAtATime) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  // A row of at most half a batch and enough outputs for pairs on a quarter of the SMs: each warp
  // takes its outputs two at a time, their rows in the halves of one batch of loads (takes_pairs).
  // Odd counts leave a warp's last pair with one row; 5001 outputs take more than one pass of the
  // grid; doubles (half a batch: 256), one-element loads (128 off a 16-byte boundary), both norms,
  // ReGLA's q, k, v and gate product (2560 of 512) and an MLP's first (2048 of 512).
  using enum UnaryOp;
  expect_parity({1, 512, 5001, RowNorm::RMS, true, GeluTanh, true, false, true}, kFloat32, 150);
  expect_parity({1, 300, 4099, RowNorm::Layer, true, Silu, true, false, true}, kFloat32, 151);
  expect_parity({1, 256, 4500, RowNorm::None, true, Relu, true, false, true}, kFloat64, 152);
  expect_parity({1, 100, 3001, RowNorm::RMS, false, Relu, true, false, true}, kFloat32, 153, /*misaligned=*/true);
  expect_parity({1, 512, 2560, RowNorm::RMS}, kFloat32, 154);
  expect_parity({1, 200, 6000, RowNorm::RMS, true, GeluErf, false, false, true}, kFloat64, 155);
  expect_parity({1, 512, 2048, RowNorm::RMS, true, GeluTanh, true}, kFloat32, 156);
  expect_parity({1, 480, 1601, RowNorm::Layer, false, Relu, false, false, true}, kFloat32, 157);
}

TEST(FusedLinearCuda, OneRowWithALargeMeanIsNormedAccurately) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  // A LayerNorm's input far from zero: the one-row kernel takes the mean in double and centres the
  // row before squaring it (a float mean lost digits to rounding and failed this test).
  for (DType dtype : {kFloat32, kFloat64}) {
    Generator gen(130);
    const Case c{1, 512, 600, RowNorm::Layer, false, UnaryOp::GeluErf, true, false, true};
    FusedLinearInputs cpu = draw(c, dtype, gen);
    cpu.x = cpu.x + 1000.0;
    const Tensor want = fused_linear(cpu, c.options()), got = fused_linear(on_gpu(cpu, false), c.options());
    EXPECT_TRUE(matches_cpu(got, want, tolerance(dtype, c.in), tolerance(dtype, c.in))) << dtype_name(dtype);
  }
}

TEST(FusedLinearCuda, WeightsOffA16ByteBoundary) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  expect_parity({3, 64, 20, RowNorm::RMS, true, UnaryOp::Silu, true, false, true}, kFloat32, 60, /*misaligned=*/true);
  expect_parity({1, 32, 5}, kFloat64, 61, /*misaligned=*/true);
  // A norm gain off the boundary (the one-row kernel reads an aligned one in 16-byte loads).
  for (int64_t rows : {1, 2}) {
    const Case c{rows, 64, 20, RowNorm::Layer, true, UnaryOp::Silu, true, false, true};
    Generator gen(62);
    const FusedLinearInputs cpu = draw(c, kFloat32, gen);
    FusedLinearInputs cuda = on_gpu(cpu, false);
    cuda.norm_weight = off_boundary(cpu.norm_weight, gpu());
    const double tol = tolerance(kFloat32, c.in);
    EXPECT_TRUE(matches_cpu(fused_linear(cuda, c.options()), fused_linear(cpu, c.options()), tol, tol)) << rows;
  }
}

TEST(FusedLinearCuda, MoreRowsThanOneLaunchTakes) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoGradGuard no_grad;
  // The op gives more than kFusedLinearMaxRows rows to the composite ops; the kernel itself takes
  // any number, 4 per launch.
  const Case c{33, 40, 21, RowNorm::RMS, true, UnaryOp::GeluTanh, true, true, true};
  Generator gen(70);
  const FusedLinearInputs cpu = draw(c, kFloat32, gen), cuda = on_gpu(cpu, false);
  const Tensor want = zeros({c.rows, c.out}), got = zeros({c.rows, c.out}, {kFloat32, gpu()});
  backend_for(kCPU).fused_linear(cpu, c.options(), want);
  backend_for(gpu()).fused_linear(cuda, c.options(), got);
  EXPECT_TRUE(matches_cpu(got, want, tolerance(kFloat32, c.in), tolerance(kFloat32, c.in)));
}

}  // namespace
}  // namespace linea::testing
