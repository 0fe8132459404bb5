// DeltaNet (nn/linear_attention/deltanet.h): the chunked delta rule equals the token-by-token recurrence
// (values, final states and gradients, with and without a carried state, over lengths that are
// and are not multiples of the chunk); the layer's decoding equals its forward in float64 and
// float32; beta at its limits; causality; the memory bound; the fixed-size state; errors.
#include "nn/linear_attention/deltanet.h"

#include <algorithm>
#include <cstdio>

#include "tests/nn/mixer_forms.h"

namespace linea::nn::linear {
namespace {

using testing::compare_forms;
using testing::FormDiff;
using testing::relative_diff;

constexpr int64_t kD = 12, kHeads = 2, kHeadDim = 4;

// ---- the delta rule itself --------------------------------------------------------------------------

struct RuleInputs {
  Tensor q, k, v, beta, s0;
  std::vector<Tensor> all() const {
    std::vector<Tensor> out{q, k, v, beta};
    if (s0.defined()) out.push_back(s0);
    return out;
  }
};

// L2-normalized q and k (as the layer makes them), beta drawn from [lo, hi].
RuleInputs rule_inputs(int64_t T, DType dtype, uint64_t seed, bool initial_state, double lo = 0.05, double hi = 0.95,
                       int64_t B = 2, int64_t H = 2, int64_t dk = 5, int64_t dv = 3) {
  Generator gen(seed);
  auto unit = [&](int64_t d) {
    const Tensor z = randn({B, H, T, d}, kFloat64, &gen);
    return z / sqrt(sum(z * z, {-1}, true));
  };
  auto cast = [dtype](const Tensor& x) { return to(x, dtype).requires_grad_(); };
  RuleInputs in;
  in.q = cast(unit(dk));
  in.k = cast(unit(dk));
  in.v = cast(randn({B, H, T, dv}, kFloat64, &gen));
  in.beta = cast(uniform({B, H, T, 1}, lo, hi, kFloat64, &gen));
  if (initial_state) in.s0 = cast(randn({B, H, dv, dk}, kFloat64, &gen));
  return in;
}

// The reference: delta_rule_step over every token.
Tensor recurrent_delta_rule(const RuleInputs& in, Tensor* final_state) {
  Tensor state = in.s0;
  std::vector<Tensor> outputs;
  for (int64_t t = 0; t < in.q.size(2); ++t) {
    auto at = [t](const Tensor& x) { return select(x, 2, t); };
    outputs.push_back(delta_rule_step(at(in.q), at(in.k), at(in.v), at(in.beta), state));
  }
  *final_state = state;
  return stack(outputs, 2);
}

// Differences of (o, S_T) and of the gradients of <o, R_o> + <S_T, R_s> w.r.t. every input.
FormDiff compare_rule(const RuleInputs& in, int64_t chunk) {
  Tensor s_chunked, s_recurrent;
  const Tensor o_chunked = chunked_delta_rule(in.q, in.k, in.v, in.beta, in.s0, &s_chunked, chunk);
  const Tensor o_recurrent = recurrent_delta_rule(in, &s_recurrent);
  FormDiff d;
  d.output = std::max(relative_diff(o_chunked, o_recurrent), relative_diff(s_chunked, s_recurrent));
  Generator gen(99);
  const Tensor r_o = to(randn(o_chunked.shape(), kFloat64, &gen), in.q.dtype());
  const Tensor r_s = to(randn(s_chunked.shape(), kFloat64, &gen), in.q.dtype());
  const auto g_chunked = grad(sum(o_chunked * r_o) + sum(s_chunked * r_s), in.all());
  const auto g_recurrent = grad(sum(o_recurrent * r_o) + sum(s_recurrent * r_s), in.all());
  const char* names[] = {"q", "k", "v", "beta", "s0"};
  for (size_t i = 0; i < g_chunked.size(); ++i) {
    d.finite = d.finite && testing::all_finite(g_chunked[i]);
    const double e = relative_diff(g_chunked[i], g_recurrent[i]);
    if (e >= d.gradient) d.gradient = e, d.worst = names[i];
  }
  return d;
}

TEST(DeltaRule, ChunkedMatchesRecurrent) {
  uint64_t seed = 1;
  for (const DType dtype : {kFloat64, kFloat32}) {
    FormDiff worst;
    for (const bool initial : {false, true})
      for (const int64_t T : {1, 7, 8, 9, 16, 29, 64})
        for (const int64_t C : {1, 4, 8, 16}) {
          const FormDiff d = compare_rule(rule_inputs(T, dtype, seed++, initial), C);
          testing::expect_forms_agree(d, dtype, "T=" + std::to_string(T) + " C=" + std::to_string(C) +
                                                    (initial ? " with S_0" : ""));
          worst.merge(d);
        }
    testing::print_forms("delta rule (o and S_T)", dtype, worst);
  }
}

// beta at its limits: near 0 the state barely changes, near 1 a key's old value is replaced
// outright (a projection), and keys repeated exactly make the chunk's matrix as far from the
// identity as it gets (every entry of the strictly lower part is beta). T = 100 over chunks of
// 64, the default size of the inverted matrix.
TEST(DeltaRule, ExtremeBetaAndRepeatedKeys) {
  uint64_t seed = 40;
  for (const DType dtype : {kFloat64, kFloat32}) {
    FormDiff worst;
    for (const auto& [lo, hi] : {std::pair{1e-9, 1e-6}, std::pair{1.0 - 1e-6, 1.0 - 1e-9}, std::pair{0.0, 1.0}})
      for (const bool repeated : {false, true}) {
        RuleInputs in = rule_inputs(100, dtype, seed++, true, lo, hi);
        if (repeated) {
          NoGradGuard no_grad;
          in.k = clone(expand(narrow(in.k, 2, 0, 1), in.k.shape())).requires_grad_();
        }
        const FormDiff d = compare_rule(in, 64);
        testing::expect_forms_agree(d, dtype, "beta in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" +
                                                  (repeated ? " repeated keys" : ""));
        worst.merge(d);
      }
    testing::print_forms("delta rule, extreme beta", dtype, worst);
  }
}

// No tensor of the chunked form grows like T x T: every tensor the graph holds an edge to is at
// most T (C + dk + dv) elements per (batch, head).
TEST(DeltaRule, LongSequenceStaysLinearInMemory) {
  const int64_t T = 2048, C = 64, dk = 16, dv = 16;
  const RuleInputs in = rule_inputs(T, kFloat32, 7, true, 0.05, 0.95, 1, 1, dk, dv);
  Tensor s;
  const Tensor o = chunked_delta_rule(in.q, in.k, in.v, in.beta, in.s0, &s, C);
  const int64_t largest = testing::largest_tensor_in_graph({o, s});
  EXPECT_LE(largest, T * (C + dk + dv));
  backward(sum(o) + sum(s));
  for (const Tensor& x : in.all()) EXPECT_TRUE(testing::all_finite(x.grad()));
  std::printf("[ deltanet ] T=%lld C=%lld: largest tensor in the graph %lld elements (T x T = %lld)\n",
              static_cast<long long>(T), static_cast<long long>(C), static_cast<long long>(largest),
              static_cast<long long>(T * T));
  NoGradGuard no_grad;
  Tensor s_recurrent;
  const Tensor o_recurrent = recurrent_delta_rule(in, &s_recurrent);
  EXPECT_LE(relative_diff(o, o_recurrent), 1e-5);
  EXPECT_LE(relative_diff(s, s_recurrent), 1e-5);
}

TEST(DeltaRule, BadInputsAreErrors) {
  const RuleInputs in = rule_inputs(8, kFloat64, 3, false);
  EXPECT_LINEA_ERROR(chunked_delta_rule(in.q, in.k, in.v, in.beta, Tensor(), nullptr, 12), "chunked_delta_rule",
                     "power of two");
  EXPECT_LINEA_ERROR(chunked_delta_rule(in.q, narrow(in.k, 3, 0, 3), in.v, in.beta), "chunked_delta_rule", "k");
  EXPECT_LINEA_ERROR(chunked_delta_rule(in.q, in.k, in.v, squeeze(in.beta, -1)), "chunked_delta_rule", "beta");
  EXPECT_LINEA_ERROR(chunked_delta_rule(in.q, in.k, to(in.v, kFloat32), in.beta), "chunked_delta_rule", "float32");
  EXPECT_LINEA_ERROR(chunked_delta_rule(in.q, in.k, in.v, in.beta, zeros({2, 2, 5, 3}, kFloat64)),
                     "chunked_delta_rule", "state");
  Tensor state;
  EXPECT_LINEA_ERROR(delta_rule_step(in.q, in.k, in.v, in.beta, state), "delta_rule_step", "3 dims");
}

// ---- the layer ------------------------------------------------------------------------------------

DeltaNetConfig small_config() {
  DeltaNetConfig c;
  c.d_model = kD;
  c.heads = kHeads;
  c.head_dim = kHeadDim;
  c.chunk_size = 8;
  return c;
}

std::shared_ptr<DeltaNet> build(const DeltaNetConfig& c, DType dtype, uint64_t seed = 3) {
  Generator gen(seed);
  auto layer = std::make_shared<DeltaNet>(c, gen);
  layer->to(dtype);
  return layer;
}

// Both forms at T = 16 (two chunks), 13 (a padded last chunk), 8 (exactly one) and 2 (shorter
// than a chunk).
void expect_layer_forms_agree(const std::string& what, const DeltaNetConfig& c, std::vector<int64_t> lengths) {
  for (const DType dtype : {kFloat64, kFloat32}) {
    FormDiff worst;
    for (const int64_t T : lengths) {
      auto layer = build(c, dtype);
      Generator gen(11 + static_cast<uint64_t>(T));
      const FormDiff d = compare_forms(*layer, randn({2, T, kD}, dtype, &gen));
      testing::expect_forms_agree(d, dtype, what + " T=" + std::to_string(T));
      worst.merge(d);
    }
    testing::print_forms("DeltaNet " + what, dtype, worst);
  }
}

TEST(DeltaNet, RecurrentFormEqualsParallelForm) {
  expect_layer_forms_agree("silu", small_config(), {16, 13, 8, 2});
  // T = 1 without the output norm only: with it, o_0 = beta_0 (k_0 . q_0) v_0 is normalized to a
  // multiple of v_0, so the gradients w.r.t. q, k and beta at T = 1 are zero but for the norm's
  // eps, and what float32 gives for them is the rounding of the terms that cancel.
  DeltaNetConfig plain = small_config();
  plain.feature_map = DeltaFeatureMap::Identity;
  plain.output_norm = false;
  plain.projection_bias = true;
  expect_layer_forms_agree("identity, no norm, bias", plain, {16, 13, 8, 2, 1});
}

// beta = sigmoid(w.x + b) pushed to ~1e-13 and to 1 - 1e-13 by its bias.
TEST(DeltaNet, SaturatedBetaStaysFinite) {
  for (const double bias : {-30.0, 30.0})
    for (const DType dtype : {kFloat64, kFloat32}) {
      auto layer = build(small_config(), dtype);
      {
        NoGradGuard no_grad;
        fill_(layer->beta_proj->bias, bias);
      }
      Generator gen(9);
      const FormDiff d = compare_forms(*layer, randn({2, 13, kD}, dtype, &gen));
      testing::expect_forms_agree(d, dtype, "beta bias " + std::to_string(bias));
      testing::print_forms("DeltaNet beta bias " + std::to_string(static_cast<int>(bias)), dtype, d);
    }
}

TEST(DeltaNet, IsCausal) {
  auto layer = build(small_config(), kFloat64);
  Generator gen(4);
  const Tensor x = randn({2, 21, kD}, kFloat64, &gen);
  for (const int64_t t : {0, 3, 7, 8, 12, 19}) EXPECT_LE(testing::causality_violation(*layer, x, t, gen), 1e-13) << t;
}

TEST(DeltaNet, StateSizeDoesNotDependOnLength) {
  auto layer = build(small_config(), kFloat64);
  Generator gen(2);
  auto state = layer->init_state(3);
  auto& s = dynamic_cast<DeltaNetState&>(*state);
  const Shape shape{3, kHeads, kHeadDim, kHeadDim};
  EXPECT_EQ(s.state.shape(), shape);
  for (int64_t t = 0; t < 40; ++t) {
    layer->step(randn({3, kD}, kFloat64, &gen), *state);
    EXPECT_EQ(s.state.shape(), shape) << "after " << t + 1 << " tokens";
  }
  EXPECT_EQ(s.position, 40);
}

TEST(DeltaNet, BadConfigAndInputsAreErrors) {
  Generator gen(1);
  DeltaNetConfig c = small_config();
  c.chunk_size = 24;
  EXPECT_LINEA_ERROR(DeltaNet(c, gen), "DeltaNet", "power of two");
  EXPECT_LINEA_ERROR(DeltaNet({.d_model = 10, .heads = 4}, gen), "DeltaNet", "divisible");
  EXPECT_LINEA_ERROR(DeltaNet({.d_model = 0}, gen), "DeltaNet", "d_model");
  EXPECT_LINEA_ERROR(parse_delta_feature_map("relu"), "DeltaNet", "relu");
  DeltaNet layer(small_config(), gen);
  EXPECT_LINEA_ERROR(layer.forward(randn({2, 3, 7})), "DeltaNet", "float32[2, 3, 7]");
  EXPECT_LINEA_ERROR(layer.step(randn({2, 3, kD}), *layer.init_state(2)), "DeltaNet", "step");
  auto state = layer.init_state(3);
  EXPECT_LINEA_ERROR(layer.step(randn({2, kD}), *state), "DeltaNet", "batch 3");
  DecodeState foreign;
  EXPECT_LINEA_ERROR(layer.step(randn({2, kD}), foreign), "DeltaNet", "init_state");
}

}  // namespace
}  // namespace linea::nn::linear
