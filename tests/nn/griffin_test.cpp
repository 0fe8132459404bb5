// The Griffin recurrent block and its RG-LRU (nn/recurrent/): the parallel linear recurrence
// equals the token-by-token one; the block's decoding equals its forward in float64 and float32,
// values and gradients, at lengths that are and are not multiples of the chunk; the RG-LRU's
// initialisation, its bounded sqrt derivative, gates pushed to a = 0 and a = 1; causality; the
// fixed-size state; errors.
#include "nn/recurrent/griffin.h"

#include <cmath>
#include <cstdio>

#include "nn/recurrent/linear_recurrence.h"
#include "tests/nn/mixer_forms.h"

namespace linea::nn {
namespace {

using testing::compare_forms;
using testing::FormDiff;
using testing::relative_diff;

constexpr int64_t kD = 12, kWidth = 8;

// ---- the linear recurrence ------------------------------------------------------------------------

// h_t = exp(log_a_t) h_{t-1} + b_t, one token at a time.
Tensor reference_recurrence(const Tensor& log_a, const Tensor& b, const Tensor& h0, Tensor* final_h) {
  Tensor h = h0;
  std::vector<Tensor> out;
  for (int64_t t = 0; t < b.size(-2); ++t) {
    h = exp(select(log_a, -2, t)) * h + select(b, -2, t);
    out.push_back(h);
  }
  *final_h = h;
  return stack(out, -2);
}

TEST(LinearRecurrence, ChunkedMatchesRecurrent) {
  // Log decays from open (-1e-7) to shut (-50, -700: e^-700 is below float32's range), with leading
  // dims (2, 3) so that the helper's flattening is exercised.
  uint64_t seed = 1;
  for (const DType dtype : {kFloat64, kFloat32}) {
    double worst_value = 0, worst_gradient = 0;
    for (const auto& [lo, hi] : {std::pair{-1.5, -1e-7}, std::pair{-1e-7, 0.0}, std::pair{-50.0, -20.0},
                                std::pair{-700.0, -1e-3}})
      for (const int64_t T : {1, 15, 16, 17, 50}) {
        Generator gen(seed++);
        auto cast = [dtype](const Tensor& x) { return to(x, dtype).requires_grad_(); };
        const Tensor log_a = cast(uniform({2, 3, T, 5}, lo, hi, kFloat64, &gen));
        const Tensor b = cast(randn({2, 3, T, 5}, kFloat64, &gen));
        const Tensor h0 = cast(randn({2, 3, 5}, kFloat64, &gen));
        Tensor final_chunked, final_reference;
        const Tensor h = linear_recurrence(log_a, b, h0, &final_chunked, {16, 4});
        const Tensor h_ref = reference_recurrence(log_a, b, h0, &final_reference);
        const double e = std::max(relative_diff(h, h_ref), relative_diff(final_chunked, final_reference));
        EXPECT_LE(e, testing::tolerance(dtype)) << "T=" << T << " log a in [" << lo << ", " << hi << "]";
        worst_value = std::max(worst_value, e);
        const Tensor r = to(randn(h.shape(), kFloat64, &gen), dtype);
        const auto g = grad(sum(h * r) + sum(final_chunked), {log_a, b, h0});
        const auto g_ref = grad(sum(h_ref * r) + sum(final_reference), {log_a, b, h0});
        for (size_t i = 0; i < g.size(); ++i) {
          EXPECT_TRUE(testing::all_finite(g[i]));
          const double eg = relative_diff(g[i], g_ref[i]);
          EXPECT_LE(eg, testing::tolerance(dtype)) << "T=" << T << " gradient " << i << " of (log_a, b, h0)";
          worst_gradient = std::max(worst_gradient, eg);
        }
      }
    std::printf("[ linear recurrence ] %s: largest relative difference, values %.2e, gradients %.2e\n",
                dtype_name(dtype), worst_value, worst_gradient);
  }
}

// ---- the RG-LRU -----------------------------------------------------------------------------------

TEST(RGLRU, SqrtWithBoundedDerivative) {
  const Tensor z = from_vector<double>({0.0, 1e-12, 2.5e-7, 1e-4, 0.25, 1.0}, {6}).requires_grad_();
  const Tensor y = sqrt_bounded_derivative(z, 1000.0);
  EXPECT_TRUE(testing::all_close(y, sqrt(detach(z)), 0, 0));  // the value is sqrt's own
  const auto g = grad(sum(y), {z})[0].to_vector<double>();
  EXPECT_DOUBLE_EQ(g[0], 1000.0);  // capped, finite at 0
  EXPECT_DOUBLE_EQ(g[1], 1000.0);
  EXPECT_NEAR(g[2], 1000.0, 1e-9);          // the floor itself: 1 / (2 sqrt(2.5e-7))
  EXPECT_NEAR(g[3], 0.5 / std::sqrt(1e-4), 1e-9);  // above the floor: sqrt's derivative
  EXPECT_DOUBLE_EQ(g[4], 1.0);
  EXPECT_DOUBLE_EQ(g[5], 0.5);
}

TEST(RGLRU, LambdaStartsWithACUniformInRange) {
  Generator gen(5);
  RGLRU lru({.width = 4096, .heads = 4096}, gen);  // 1 x 1 gate blocks: only Lambda matters here
  const Tensor a_c = pow(sigmoid(to(lru.lambda, kFloat64)), 8.0);  // a^c with c = 8
  EXPECT_GE(min(a_c).item(), 0.9 - 1e-6);
  EXPECT_LE(max(a_c).item(), 0.999 + 1e-6);
  EXPECT_NEAR(mean(a_c).item(), (0.9 + 0.999) / 2, 0.005);  // uniform, so centered
  // log a_t = -c r softplus(-Lambda) is c r log a: a_t = a^(c r).
  EXPECT_TRUE(testing::all_close(-8.0 * softplus(neg(to(lru.lambda, kFloat64))), log(a_c), 1e-9, 1e-12));
}

// forward from a state and step from the same state agree, and both hand back the same h_T.
TEST(RGLRU, ForwardFromStateMatchesSteps) {
  for (const DType dtype : {kFloat64, kFloat32}) {
    Generator gen(6);
    RGLRU lru({.width = kWidth, .heads = 2, .scan = {8, 4}}, gen);
    lru.to(dtype);
    const Tensor x = randn({2, 19, kWidth}, dtype, &gen), h0 = randn({2, kWidth}, dtype, &gen);
    Tensor h_parallel;
    const Tensor y = lru.forward(x, h0, &h_parallel);
    Tensor h = h0;
    std::vector<Tensor> ys;
    for (int64_t t = 0; t < 19; ++t) ys.push_back(lru.step(select(x, 1, t), h));
    EXPECT_LE(relative_diff(stack(ys, 1), y), testing::tolerance(dtype));
    EXPECT_LE(relative_diff(h, h_parallel), testing::tolerance(dtype));
  }
}

TEST(RGLRU, BlockDiagonalGatesMatchADenseBlockMatrix) {
  Generator gen(7);
  BlockDiagonalLinear gates(6, 3, gen);
  gates.to(kFloat64);
  NoGradGuard no_grad;
  fill_(gates.bias, 0.5);
  Tensor dense = zeros({6, 6}, kFloat64);
  for (int64_t h = 0; h < 3; ++h) {
    Tensor block = narrow(narrow(dense, 0, 2 * h, 2), 1, 2 * h, 2);
    copy_(block, select(gates.weight, 0, h));
  }
  const Tensor x = randn({2, 5, 6}, kFloat64, &gen);
  EXPECT_TRUE(testing::all_close(gates.forward(x), matmul(x, dense) + 0.5, 1e-12, 1e-12));
}

// ---- the block ------------------------------------------------------------------------------------

GriffinConfig small_config(int64_t heads = 2) {
  GriffinConfig c;
  c.d_model = kD;
  c.lru.width = kWidth;
  c.lru.heads = heads;
  c.lru.scan = {8, 4};
  return c;
}

std::shared_ptr<GriffinBlock> build(const GriffinConfig& c, DType dtype, uint64_t seed = 3) {
  Generator gen(seed);
  auto block = std::make_shared<GriffinBlock>(c, gen);
  block->to(dtype);
  return block;
}

TEST(Griffin, RecurrentFormEqualsParallelForm) {
  for (const int64_t heads : {1, 2})
    for (const DType dtype : {kFloat64, kFloat32}) {
      FormDiff worst;
      for (const int64_t T : {16, 13, 8, 3, 1}) {
        auto block = build(small_config(heads), dtype);
        Generator gen(20 + static_cast<uint64_t>(T));
        const FormDiff d = compare_forms(*block, randn({2, T, kD}, dtype, &gen));
        testing::expect_forms_agree(d, dtype, "heads=" + std::to_string(heads) + " T=" + std::to_string(T));
        worst.merge(d);
      }
      testing::print_forms("Griffin heads=" + std::to_string(heads), dtype, worst);
    }
}

// Lambda = +30 makes a = sigmoid(30) = 1 - 1e-13, so a_t is 1 to within 1e-12 and
// sqrt(1 - a_t^2) lives on the clipped part of its derivative; Lambda = -30 makes a ~ e^-30, so
// a_t = a^(8 r) ~ e^(-240 r): the state is forgotten at once. Large gate biases push r and i to
// 0 and 1 on top. Values and gradients stay finite, and the forms agree.
TEST(Griffin, ExtremeGatesStayFinite) {
  struct Extreme {
    double lambda, gate_bias;
  };
  for (const Extreme e : {Extreme{30, 0}, Extreme{30, -30}, Extreme{30, 30}, Extreme{-30, 0}, Extreme{-30, 30},
                          Extreme{-30, -30}})
    for (const DType dtype : {kFloat64, kFloat32}) {
      auto block = build(small_config(), dtype);
      {
        NoGradGuard no_grad;
        fill_(block->lru->lambda, e.lambda);
        fill_(block->lru->gate_a->bias, e.gate_bias);
        fill_(block->lru->gate_x->bias, -e.gate_bias);
      }
      Generator gen(9);
      const FormDiff d = compare_forms(*block, randn({2, 13, kD}, dtype, &gen));
      const std::string what = "Lambda " + std::to_string(static_cast<int>(e.lambda)) + " gate bias " +
                               std::to_string(static_cast<int>(e.gate_bias));
      testing::expect_forms_agree(d, dtype, what);
      testing::print_forms("Griffin " + what, dtype, d);
    }
}

// The parallel form holds nothing of T x T: the largest tensor in its graph is the scan's
// diagonal sub-blocks, B T L D_rnn for sub-blocks of L (or a projection's B T D).
TEST(Griffin, LongSequenceStaysLinearInMemory) {
  const int64_t B = 2, T = 2048, L = 16;
  GriffinConfig c = small_config();
  c.lru.scan = {64, L};
  auto block = build(c, kFloat32);
  Generator gen(12);
  const Tensor x = randn({B, T, kD}, kFloat32, &gen).requires_grad_();
  const Tensor y = block->forward(x);
  const int64_t largest = testing::largest_tensor_in_graph({y});
  EXPECT_LE(largest, B * T * std::max(L * kWidth, kD));
  std::printf("[ griffin ] T=%lld: largest tensor in the graph %lld elements (T x T = %lld)\n",
              static_cast<long long>(T), static_cast<long long>(largest), static_cast<long long>(T * T));
  backward(sum(y * y));
  EXPECT_TRUE(testing::all_finite(x.grad()));
}

TEST(Griffin, IsCausal) {
  auto block = build(small_config(), kFloat64);
  Generator gen(4);
  const Tensor x = randn({2, 21, kD}, kFloat64, &gen);
  for (const int64_t t : {0, 2, 3, 7, 8, 12, 19})
    EXPECT_LE(testing::causality_violation(*block, x, t, gen), 1e-13) << t;
}

TEST(Griffin, StateSizeDoesNotDependOnLength) {
  auto block = build(small_config(), kFloat64);
  Generator gen(2);
  auto state = block->init_state(3);
  auto& s = dynamic_cast<GriffinState&>(*state);
  const Shape conv_shape{3, 3, kWidth}, h_shape{3, kWidth};
  for (int64_t t = 0; t < 40; ++t) {
    block->step(randn({3, kD}, kFloat64, &gen), *state);
    EXPECT_EQ(s.conv.shape(), conv_shape) << "after " << t + 1 << " tokens";
    EXPECT_EQ(s.h.shape(), h_shape) << "after " << t + 1 << " tokens";
  }
  EXPECT_EQ(s.position, 40);
}

TEST(Griffin, BadConfigAndInputsAreErrors) {
  Generator gen(1);
  GriffinConfig c = small_config(3);  // 8 channels in 3 blocks
  EXPECT_LINEA_ERROR(GriffinBlock(c, gen), "RGLRU", "divisible");
  c = small_config();
  c.lru.a_max = 1.0;
  EXPECT_LINEA_ERROR(GriffinBlock(c, gen), "RGLRU", "a_max");
  c = small_config();
  c.d_model = 0;
  EXPECT_LINEA_ERROR(GriffinBlock(c, gen), "GriffinBlock", "d_model");
  GriffinBlock block(small_config(), gen);
  EXPECT_LINEA_ERROR(block.forward(randn({2, 3, 7})), "GriffinBlock", "float32[2, 3, 7]");
  EXPECT_LINEA_ERROR(block.step(randn({2, 3, kD}), *block.init_state(2)), "GriffinBlock", "step");
  auto state = block.init_state(3);
  EXPECT_LINEA_ERROR(block.step(randn({2, kD}), *state), "GriffinBlock", "batch 3");
  Tensor h = block.lru->init_state(3);
  EXPECT_LINEA_ERROR(block.lru->step(randn({2, kWidth}), h), "RGLRU", "state");
  EXPECT_LINEA_ERROR(linear_recurrence(zeros({2, 3, 4}), zeros({2, 3, 5})), "linear_recurrence", "one shape");
}

}  // namespace
}  // namespace linea::nn
