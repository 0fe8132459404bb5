// The layers that act along time: RoPE and CausalConv1D, against hand computations, and their
// decoding forms (one position at a time, from an offset or a state) against the full forward.
#include <cmath>

#include "nn/layers/conv1d.h"
#include "nn/layers/rope.h"
#include "tests/test_util.h"

namespace linea::nn {
namespace {

using testing::all_close;

std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// RoPE written out for x (rows, T, dh) flattened: row t is at position offset + t.
std::vector<double> rope_by_hand(const Tensor& x, int64_t offset, int64_t rotary_dim, double base = 10000.0) {
  const int64_t T = x.size(-2), dh = x.size(-1), half = rotary_dim / 2;
  const std::vector<double> in = values(x);
  std::vector<double> out = in;
  for (size_t row = 0; row < in.size() / dh; ++row) {
    const double p = static_cast<double>(offset + static_cast<int64_t>(row) % T);
    const double* a = &in[row * dh];
    double* y = &out[row * dh];
    for (int64_t i = 0; i < half; ++i) {
      const double theta = std::pow(base, -2.0 * i / rotary_dim), c = std::cos(p * theta), s = std::sin(p * theta);
      y[i] = a[i] * c - a[i + half] * s;
      y[i + half] = a[i + half] * c + a[i] * s;
    }
  }
  return out;
}

TEST(RoPE, MatchesTheRotationFormula) {
  Generator gen(1);
  const Tensor x = randn({2, 3, 5, 8}, kFloat64, &gen);
  RoPE rope(8);
  EXPECT_TRUE(all_close(rope.forward(x), from_vector(rope_by_hand(x, 0, 8), x.shape()), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(rope.forward(x, 37), from_vector(rope_by_hand(x, 37, 8), x.shape()), 1e-12, 1e-12));
  // Partial rotary (Pythia): the dims past rotary_dim pass through untouched.
  RoPE partial(8, {.base = 500.0, .rotary_dim = 4});
  EXPECT_TRUE(all_close(partial.forward(x, 3), from_vector(rope_by_hand(x, 3, 4, 500.0), x.shape()), 1e-12, 1e-12));
  // float32 input: same numbers to float32 precision, tables converted once to float32.
  const Tensor y32 = rope.forward(to(x, kFloat32), 5);
  EXPECT_EQ(y32.dtype(), kFloat32);
  EXPECT_TRUE(all_close(y32, from_vector(rope_by_hand(x, 5, 8), x.shape()), 1e-5, 1e-5));
  EXPECT_EQ(rope.num_parameters(), 0);
  EXPECT_TRUE(rope.state_dict().empty());
}

TEST(RoPE, DotProductDependsOnlyOnRelativePosition) {
  Generator gen(2);
  RoPE rope(16);
  const Tensor q = randn({16}, kFloat64, &gen), k = randn({16}, kFloat64, &gen);
  auto score = [&](int64_t m, int64_t n) { return sum(rope.step(q, m) * rope.step(k, n)).item(); };
  const double at_3 = score(3, 0);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{5, 2}, {40, 37}, {3000, 2997}})
    EXPECT_NEAR(score(m, n), at_3, 1e-9 * std::abs(at_3) + 1e-11) << m << ", " << n;
  EXPECT_GT(std::abs(score(4, 0) - at_3), 1e-3);  // a different distance scores differently
  EXPECT_NEAR(score(7, 7), sum(q * k).item(), 1e-10);  // same position: the plain dot product
}

TEST(RoPE, DecodingAtAnOffsetEqualsTheFullForward) {
  Generator gen(3);
  RoPE rope(8, {.max_len = 4});  // a short table, so decoding has to grow it
  const int64_t T = 9;
  const Tensor x = randn({2, 3, T, 8}, kFloat64, &gen);
  const Tensor full = rope.forward(x);
  EXPECT_GE(rope.table_length(), T);
  for (int64_t t = 0; t < T; ++t) {
    EXPECT_TRUE(all_close(rope.step(select(x, 2, t), t), select(full, 2, t), 0, 1e-15)) << t;
    EXPECT_TRUE(all_close(rope.forward(narrow(x, 2, t, 1), t), narrow(full, 2, t, 1), 0, 1e-15)) << t;
  }
  EXPECT_TRUE(all_close(rope.forward(narrow(x, 2, 4, 5), 4), narrow(full, 2, 4, 5), 0, 1e-15));
  // Far beyond the initial table: it grows, and the values stay exact.
  EXPECT_TRUE(all_close(rope.forward(x, 5000), from_vector(rope_by_hand(x, 5000, 8), x.shape()), 1e-10, 1e-10));
  EXPECT_GE(rope.table_length(), 5000 + T);
}

TEST(RoPE, RejectsBadShapesAndOptions) {
  RoPE rope(8);
  EXPECT_LINEA_ERROR(rope.forward(randn({2, 3, 6})), "RoPE", "(..., 8)");
  EXPECT_LINEA_ERROR(rope.forward(randn({8})), "RoPE", "time");
  EXPECT_LINEA_ERROR(rope.forward(randn({3, 8}), -1), "offset must be non-negative");
  EXPECT_LINEA_ERROR(RoPE(8, {.rotary_dim = 3}), "rotary_dim must be even");
  EXPECT_LINEA_ERROR(RoPE(8, {.rotary_dim = 10}), "rotary_dim");
  EXPECT_LINEA_ERROR(RoPE(7), "rotary_dim must be even");
}

// Sets a parameter to random values (bias starts at zero, which would hide a missing term).
void randomize(Tensor& p, Generator& gen) {
  NoGradGuard no_grad;
  copy_(p, randn(p.shape(), p.dtype(), &gen));
}

// y[b, t, c] = bias[c] + sum_k w[c, k] x[b, t - (W - 1) + k, c], zero before t = 0.
std::vector<double> conv_by_hand(const Tensor& x, const CausalConv1D& conv) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), W = conv.width();
  const std::vector<double> in = values(x), w = values(conv.weight), b = values(conv.bias);
  std::vector<double> y(in.size());
  for (int64_t n = 0; n < B; ++n)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) {
        double s = b[c];
        for (int64_t k = 0; k < W; ++k) {
          const int64_t src = t - (W - 1) + k;
          if (src >= 0) s += w[c * W + k] * in[(n * T + src) * C + c];
        }
        y[(n * T + t) * C + c] = s;
      }
  return y;
}

std::shared_ptr<CausalConv1D> random_conv(int64_t channels, int64_t width, Generator& gen) {
  auto conv = std::make_shared<CausalConv1D>(channels, gen, width);
  conv->to(kFloat64);
  randomize(conv->bias, gen);
  return conv;
}

TEST(CausalConv1D, MatchesHandComputation) {
  Generator gen(4);
  for (int64_t width : {1, 2, 4, 7}) {
    const auto conv = random_conv(5, width, gen);
    const Tensor x = randn({2, 6, 5}, kFloat64, &gen);
    EXPECT_TRUE(all_close(conv->forward(x), from_vector(conv_by_hand(x, *conv), x.shape()), 1e-12, 1e-12)) << width;
  }
}

TEST(CausalConv1D, ParametersAndInit) {
  Generator gen(5);
  CausalConv1D conv(3000, gen);
  std::vector<std::pair<std::string, bool>> names;
  for (const NamedParameter& p : conv.named_parameters()) names.emplace_back(p.name, p.weight_decay);
  EXPECT_EQ(names, (std::vector<std::pair<std::string, bool>>{{"weight", true}, {"bias", false}}));
  EXPECT_EQ(conv.weight.shape(), Shape({3000, 4}));
  EXPECT_EQ(conv.num_parameters(), 3000 * 5);
  EXPECT_NEAR(std::sqrt(var(conv.weight).item()), 0.5, 0.02);  // N(0, 1 / width)
  EXPECT_EQ(max(abs(conv.bias)).item(), 0.0);
}

// The conv run token by token through step, outputs stacked along time.
Tensor run_steps(const CausalConv1D& conv, const Tensor& x) {
  Tensor state = conv.init_state(x.size(0));
  std::vector<Tensor> ys;
  for (int64_t t = 0; t < x.size(1); ++t) ys.push_back(conv.step(select(x, 1, t), state));
  return stack(ys, 1);
}

TEST(CausalConv1D, StepByStepEqualsForwardInValuesAndGradients) {
  Generator gen(6);
  for (int64_t width : {1, 4}) {
    const auto conv = random_conv(3, width, gen);
    const Tensor x = randn({2, 7, 3}, kFloat64, &gen).requires_grad_(true);
    const Tensor cotangent = randn({2, 7, 3}, kFloat64, &gen);
    const Tensor full = conv->forward(x), stepped = run_steps(*conv, x);
    EXPECT_TRUE(all_close(stepped, full, 1e-14, 1e-14)) << width;
    const std::vector<Tensor> wrt = {x, conv->weight, conv->bias};
    const std::vector<Tensor> g_full = grad(sum(full * cotangent), wrt), g_step = grad(sum(stepped * cotangent), wrt);
    for (size_t i = 0; i < wrt.size(); ++i) EXPECT_TRUE(all_close(g_step[i], g_full[i], 1e-13, 1e-13)) << i;
  }
}

TEST(CausalConv1D, ChunksCarryTheStateAcrossCalls) {
  Generator gen(7);
  const auto conv = random_conv(4, 4, gen);
  const Tensor x = randn({2, 8, 4}, kFloat64, &gen);
  const Tensor full = conv->forward(x);
  // Chunks of 1, 2 and 5 steps: the first two are shorter than the 3-step history.
  Tensor state;
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t length : {1, 2, 5}) {
    parts.push_back(conv->forward(narrow(x, 1, start, length), state, &state));
    start += length;
  }
  EXPECT_TRUE(all_close(cat(parts, 1), full, 1e-14, 1e-14));
  EXPECT_TRUE(all_close(state, narrow(x, 1, 5, 3), 0, 0));  // the last width - 1 inputs
  // A prompt in one forward, then decoding continues from its state.
  Tensor prompt_state;
  conv->forward(narrow(x, 1, 0, 6), Tensor(), &prompt_state);
  EXPECT_TRUE(all_close(conv->step(select(x, 1, 6), prompt_state), select(full, 1, 6), 1e-14, 1e-14));
}

TEST(CausalConv1D, RejectsBadShapes) {
  Generator gen(8);
  CausalConv1D conv(4, gen);
  EXPECT_LINEA_ERROR(conv.forward(randn({2, 5, 3})), "CausalConv1D", "(batch, time, 4)");
  EXPECT_LINEA_ERROR(conv.forward(randn({2, 5, 4}), zeros({2, 2, 4})), "CausalConv1D", "state must be (2, 3, 4)");
  Tensor state = conv.init_state(2);
  EXPECT_EQ(state.shape(), Shape({2, 3, 4}));
  EXPECT_LINEA_ERROR(conv.step(randn({2, 1, 4}), state), "CausalConv1D", "step expects input (batch, 4)");
  EXPECT_LINEA_ERROR(CausalConv1D(4, gen, 0), "width must be positive");
}

}  // namespace
}  // namespace linea::nn
