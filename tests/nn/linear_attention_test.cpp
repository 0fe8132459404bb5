// LinearAttention (nn/linear_attention/linear_attention.h): for every preset, feature map and gate, the
// recurrent form (step, token by token) equals the parallel form (forward, chunked) in outputs
// and in gradients w.r.t. the input and every parameter, in float64 and float32, at lengths
// that are and are not multiples of the chunk; saturated gates stay finite; the prefix key max is
// causal and the paper's global max is not; sum normalization, scales and output norms.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "nn/linear_attention/linear_attention.h"
#include "tests/test_util.h"

namespace linea::nn::linear {
namespace {

using linea::testing::all_close;

constexpr int64_t kD = 12, kHeads = 2, kHeadDim = 4;

// Small chunks so that a short sequence spans several chunks of several sub-blocks.
LinearAttentionConfig small(LinearAttentionConfig c) {
  c.scan = {.chunk_size = 8, .sub_block = 4};
  return c;
}

LinearAttentionConfig preset(LinearAttentionPreset p) { return small(linear_attention_preset(p, kD, kHeads, kHeadDim)); }

LinearAttentionConfig plain() {
  LinearAttentionConfig c;
  c.d_model = kD;
  c.heads = kHeads;
  c.head_dim = kHeadDim;
  return small(c);
}

Tensor decode_all(SequenceMixer& layer, const Tensor& x) {
  auto state = layer.init_state(x.size(0));
  std::vector<Tensor> outputs;
  for (int64_t t = 0; t < x.size(1); ++t) outputs.push_back(layer.step(select(x, 1, t), *state));
  return stack(outputs, 1);
}

// max |a - b| / max |b|: the difference relative to the tensor's own scale.
double relative_diff(const Tensor& a, const Tensor& b) {
  const double scale = max(abs(to(detach(b), kFloat64))).item();
  const double diff = max_abs_diff(to(detach(a), kFloat64), to(detach(b), kFloat64));
  return scale > 0 ? diff / scale : diff;
}

struct FormDiff {
  double output = 0, gradient = 0;
  std::string worst;  // the input or parameter with the largest gradient difference
};

// Both forms on x (B, T, D) of the layer's dtype; gradients of sum(y * u) for a fixed random u.
FormDiff compare_forms(LinearAttention& layer, const Tensor& x_values, Generator& gen) {
  const Tensor x = clone(x_values).requires_grad_();
  const Tensor u = randn(x.shape(), x.dtype(), &gen);
  std::vector<Tensor> inputs{x};
  std::vector<std::string> names{"input"};
  for (const NamedParameter& p : layer.named_parameters()) {
    inputs.push_back(p.tensor);
    names.push_back(p.name);
  }
  const Tensor parallel = layer.forward(x), recurrent = decode_all(layer, x);
  FormDiff d;
  d.output = relative_diff(recurrent, parallel);
  const auto g_par = grad(sum(parallel * u), inputs, Tensor(), false, /*allow_unused=*/true);
  const auto g_rec = grad(sum(recurrent * u), inputs, Tensor(), false, true);
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(g_par[i].defined(), g_rec[i].defined()) << names[i];
    if (!g_par[i].defined() || !g_rec[i].defined()) continue;
    const double r = relative_diff(g_rec[i], g_par[i]);
    if (r >= d.gradient) {
      d.gradient = r;
      d.worst = names[i];
    }
  }
  return d;
}

std::shared_ptr<LinearAttention> build(const LinearAttentionConfig& c, DType dtype, uint64_t seed = 3) {
  Generator gen(seed);
  auto layer = std::make_shared<LinearAttention>(c, gen);
  layer->to(dtype);
  return layer;
}

bool all_finite(const Tensor& t) {
  for (double v : to(detach(t), kFloat64).to_vector<double>())
    if (!std::isfinite(v)) return false;
  return true;
}

// Checks both forms agree, in float64 (1e-9) and float32 (1e-5), at T = 16 (two chunks of 8) and
// T = 13 (a padded last chunk), and prints the largest differences for the record. The float32
// bound holds for these fixed draws; with sign-indefinite maps (identity, RFA) some draws are
// ill-conditioned (phi(q).phi(k) or c^T phi(q) cancels) and reach ~1e-4 in float32, as 2^29 times
// their float64 difference (nn/linear_attention/README.md).
void expect_forms_agree(const std::string& what, const LinearAttentionConfig& c) {
  for (const DType dtype : {kFloat64, kFloat32}) {
    const double tol = dtype == kFloat64 ? 1e-9 : 1e-5;
    FormDiff worst;
    for (const int64_t T : {16, 13}) {
      auto layer = build(c, dtype);
      Generator gen(11 + static_cast<uint64_t>(T));
      const FormDiff d = compare_forms(*layer, randn({2, T, kD}, dtype, &gen), gen);
      EXPECT_LE(d.output, tol) << what << " " << dtype_name(dtype) << " T=" << T << ": outputs";
      EXPECT_LE(d.gradient, tol) << what << " " << dtype_name(dtype) << " T=" << T << ": gradient of " << d.worst;
      if (d.output > worst.output) worst.output = d.output;
      if (d.gradient >= worst.gradient) worst = {worst.output, d.gradient, d.worst};
    }
    std::printf("[forms] %-28s %-7s output %.2e  gradient %.2e (%s)\n", what.c_str(), dtype_name(dtype),
                worst.output, worst.gradient, worst.worst.c_str());
  }
}

// ---- recurrent == parallel ------------------------------------------------------------------------

class LinearAttentionPresets : public ::testing::TestWithParam<LinearAttentionPreset> {};

TEST_P(LinearAttentionPresets, RecurrentFormEqualsParallelForm) {
  expect_forms_agree(preset_name(GetParam()), preset(GetParam()));
}

// Changing tokens after t leaves outputs up to t unchanged (with the default prefix key max).
TEST_P(LinearAttentionPresets, IsCausal) {
  auto layer = build(preset(GetParam()), kFloat64);
  Generator gen(5);
  const int64_t T = 19, t0 = 9;
  const Tensor x = randn({2, T, kD}, kFloat64, &gen);
  // The future replaced by larger inputs, so a running or global key max would notice.
  const Tensor changed = cat({narrow(x, 1, 0, t0 + 1), randn({2, T - t0 - 1, kD}, kFloat64, &gen) * 3.0}, 1);
  const Tensor y = layer->forward(x), y_changed = layer->forward(changed);
  EXPECT_TRUE(all_close(narrow(y_changed, 1, 0, t0 + 1), narrow(y, 1, 0, t0 + 1), 1e-12, 1e-14));
  EXPECT_GT(max_abs_diff(narrow(y_changed, 1, t0 + 1, T - t0 - 1), narrow(y, 1, t0 + 1, T - t0 - 1)), 1e-6);
}

// Extreme activations: gate biases at +-40 push every gate to 1 or 0; a preset without a gate
// gets inputs 100 times larger instead, which pushes its feature maps to their extremes. Nothing
// may become NaN or Inf, in either form or in the gradients, and the forms still agree.
TEST_P(LinearAttentionPresets, SaturatedActivationsStayFinite) {
  const LinearAttentionConfig c = preset(GetParam());
  const bool gated = c.gate.kind != GateKind::None;
  for (const double extreme : {-40.0, 40.0}) {
    for (const DType dtype : {kFloat64, kFloat32}) {
      LinearAttentionConfig biased = c;
      if (gated) biased.gate.bias_init = extreme;
      auto layer = build(biased, dtype);
      Generator gen(9);
      const double input_scale = gated ? 1.0 : 2.5 * std::abs(extreme);
      const Tensor x = clone(randn({2, 13, kD}, dtype, &gen) * input_scale).requires_grad_();
      const Tensor y = layer->forward(x), y_rec = decode_all(*layer, x);
      EXPECT_TRUE(all_finite(y)) << "extreme " << extreme;
      EXPECT_TRUE(all_finite(y_rec)) << "extreme " << extreme;
      std::vector<Tensor> inputs = layer->parameters();
      inputs.push_back(x);
      for (const Tensor& g : grad(sum(y * y), inputs, Tensor(), false, true))
        if (g.defined()) EXPECT_TRUE(all_finite(g)) << "extreme " << extreme;
      EXPECT_LE(relative_diff(y_rec, y), dtype == kFloat64 ? 1e-9 : 1e-5) << "extreme " << extreme;
    }
  }
}

// init_state leaves the state's memory unwritten (a prefill replaces it whole); whatever reads it
// first, a step or members() (stacking, graph capture, these tests), finds zeros: the memory is
// filled with garbage first here, so that the test fails if the zeros are ever skipped.
TEST_P(LinearAttentionPresets, AnUnwrittenStateReadsAsZeros) {
  auto layer = build(preset(GetParam()), kFloat64);
  Generator gen(3);
  const Tensor x = randn({3, 5, kD}, kFloat64, &gen);
  const NoGradGuard no_grad;
  auto fresh = layer->init_state(3), zeroed = layer->init_state(3);
  auto& f = dynamic_cast<LinearAttentionState&>(*fresh);
  auto& z = dynamic_cast<LinearAttentionState&>(*zeroed);
  ASSERT_TRUE(f.state_unwritten);
  fill_(f.state, std::nan(""));  // what the memory might hold; still counts as unwritten
  z.state = zeros(z.state.shape(), kFloat64);
  z.state_unwritten = false;
  for (int64_t t = 0; t < x.size(1); ++t)
    EXPECT_TRUE(all_close(layer->step(select(x, 1, t), *fresh), layer->step(select(x, 1, t), *zeroed), 0, 0))
        << "token " << t;
  EXPECT_FALSE(f.state_unwritten);

  auto read = layer->init_state(2);
  auto& r = dynamic_cast<LinearAttentionState&>(*read);
  fill_(r.state, std::nan(""));
  const auto members = read->tensors();  // through members()
  EXPECT_TRUE(all_close(members[0].second, zeros(r.state.shape(), kFloat64), 0, 0));
  auto other = layer->init_state(1);
  fill_(dynamic_cast<LinearAttentionState&>(*other).state, std::nan(""));
  const Tensor stacked = layer->stack_states({read.get(), other.get()})->tensors()[0].second;
  EXPECT_EQ(stacked.size(0), 3);
  EXPECT_TRUE(all_close(stacked, zeros(stacked.shape(), kFloat64), 0, 0));
}

// The decoding state has one size, however many tokens it has seen.
TEST_P(LinearAttentionPresets, StateSizeDoesNotDependOnLength) {
  auto layer = build(preset(GetParam()), kFloat64);
  Generator gen(2);
  auto state = layer->init_state(3);
  auto& s = dynamic_cast<LinearAttentionState&>(*state);
  const Shape initial = s.state.shape();
  EXPECT_EQ(initial, (Shape{3, kHeads, layer->state_value_dim(), layer->feature_dim()}));
  int64_t key_max_numel = -1;
  for (int64_t t = 0; t < 40; ++t) {
    layer->step(randn({3, kD}, kFloat64, &gen), *state);
    EXPECT_EQ(s.state.shape(), initial) << "after " << t + 1 << " tokens";
    if (s.key_max.defined()) {
      if (key_max_numel < 0) key_max_numel = s.key_max.numel();
      EXPECT_EQ(s.key_max.numel(), key_max_numel);
      EXPECT_EQ(s.key_max.numel(), 3 * kHeads);
    }
  }
  EXPECT_EQ(s.position, 40);
}

INSTANTIATE_TEST_SUITE_P(Linear, LinearAttentionPresets, ::testing::ValuesIn(all_linear_attention_presets()),
                         [](const auto& info) {
                           std::string n = preset_name(info.param);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

class LinearAttentionFeatureMaps : public ::testing::TestWithParam<FeatureMapKind> {};

// Each map alone (no gate, no sum normalization, RMS output norm), then with a scalar gate and
// sum normalization where the map is non-negative.
TEST_P(LinearAttentionFeatureMaps, RecurrentFormEqualsParallelForm) {
  LinearAttentionConfig c = plain();
  c.feature_map.kind = GetParam();
  if (GetParam() == FeatureMapKind::Product) c.feature_map.product_second_dim = 3;
  expect_forms_agree("map " + feature_map_name(GetParam()), c);
}

INSTANTIATE_TEST_SUITE_P(Linear, LinearAttentionFeatureMaps,
                         ::testing::Values(FeatureMapKind::Identity, FeatureMapKind::Relu, FeatureMapKind::EluPlusOne,
                                           FeatureMapKind::RandomFourier, FeatureMapKind::FavorPlus,
                                           FeatureMapKind::Hedgehog, FeatureMapKind::NormalizedExp,
                                           FeatureMapKind::Product),
                         [](const auto& info) {
                           std::string n = feature_map_name(info.param);
                           std::replace(n.begin(), n.end(), '+', 'p');
                           return n;
                         });

TEST(LinearAttentionForms, ProductOfNormalizedExpCarriesTheKeyMax) {
  LinearAttentionConfig c = plain();
  c.feature_map = {.kind = FeatureMapKind::Product, .product_base = FeatureMapKind::NormalizedExp,
                   .product_second_dim = 2};
  c.gate.kind = GateKind::ReGLA;
  expect_forms_agree("product[normalized_exp]+regla", c);
}

struct GateCase {
  std::string name;
  GateConfig gate;
};

class LinearAttentionGates : public ::testing::TestWithParam<GateCase> {};

// Each gate on the identity map (its decays alone) and on the normalized exp map (its decays
// joined by the running key max's).
TEST_P(LinearAttentionGates, RecurrentFormEqualsParallelForm) {
  for (const FeatureMapKind map : {FeatureMapKind::Identity, FeatureMapKind::NormalizedExp}) {
    LinearAttentionConfig c = plain();
    c.feature_map.kind = map;
    c.gate = GetParam().gate;
    expect_forms_agree("gate " + GetParam().name + " on " + feature_map_name(map), c);
  }
}

INSTANTIATE_TEST_SUITE_P(Linear, LinearAttentionGates,
                         ::testing::Values(GateCase{"scalar", {.kind = GateKind::Scalar}},
                                           GateCase{"fast_decay", {.kind = GateKind::FastDecay}},
                                           GateCase{"gla", {.kind = GateKind::GLA}},
                                           GateCase{"gla_low_rank", {.kind = GateKind::GLA, .gla_low_rank = 3}},
                                           GateCase{"regla_value", {.kind = GateKind::ReGLA}},
                                           GateCase{"regla_key",
                                                    {.kind = GateKind::ReGLA, .regla_dim = DecayDim::Key}}),
                         [](const auto& info) { return info.param.name; });

// ---- options ----------------------------------------------------------------------------------------

TEST(LinearAttentionOptions, SumNormalizationScalesAndNormsAgreeInBothForms) {
  for (const bool sum_norm : {false, true})
    for (const QueryScale scale : {QueryScale::InvSqrtDim, QueryScale::ReGLAVariance, QueryScale::None})
      for (const OutputNorm norm : {OutputNorm::None, OutputNorm::RMS, OutputNorm::Layer}) {
        LinearAttentionConfig c = plain();
        c.feature_map.kind = FeatureMapKind::EluPlusOne;
        c.gate.kind = GateKind::Scalar;
        c.sum_normalization = sum_norm;
        c.scale = scale;
        c.output_norm = norm;
        auto layer = build(c, kFloat64);
        Generator gen(4);
        const FormDiff d = compare_forms(*layer, randn({2, 13, kD}, kFloat64, &gen), gen);
        EXPECT_LE(d.output, 1e-9) << describe(c);
        EXPECT_LE(d.gradient, 1e-9) << describe(c) << ": " << d.worst;
      }
}

// With sum normalization the output is a weighted average of the values: with a non-negative map,
// no gate and no norm, y = W_o o where each o_t lies in the convex hull of v_1..v_t; the weights
// are phi(q_t).phi(k_s) / sum_s' phi(q_t).phi(k_s'). Compared with a direct quadratic reference.
TEST(LinearAttentionOptions, SumNormalizationMatchesQuadraticReference) {
  LinearAttentionConfig c = plain();
  c.feature_map.kind = FeatureMapKind::EluPlusOne;
  c.sum_normalization = true;
  c.sum_norm_eps = 0;
  c.scale = QueryScale::None;
  c.output_norm = OutputNorm::None;
  Generator gen(6);
  LinearAttention layer(c, gen);
  layer.to(kFloat64);
  const Tensor x = randn({1, 10, kD}, kFloat64, &gen);
  // Reference, with the layer's own projection weights.
  const auto named = layer.named_parameters();
  auto param = [&](const std::string& name) {
    for (const auto& p : named)
      if (p.name == name) return p.tensor;
    return Tensor();
  };
  auto project = [&](const std::string& name) {
    return transpose(reshape(matmul(x, t(param(name + ".weight"))), {1, 10, kHeads, kHeadDim}), 1, 2);
  };
  const Tensor fq = elu(project("q_proj")) + 1.0, fk = elu(project("k_proj")) + 1.0, v = project("v_proj");
  const Tensor weights = tril(matmul(fq, transpose(fk, -1, -2)));  // (1, H, T, T)
  const Tensor o = matmul(weights / sum(weights, {-1}, true), v);   // (1, H, T, dv)
  const Tensor y = matmul(reshape(transpose(o, 1, 2), {1, 10, kHeads * kHeadDim}), t(param("out_proj.weight")));
  EXPECT_TRUE(all_close(layer.forward(x), y, 1e-10, 1e-12));
}

TEST(LinearAttentionOptions, ScaleValues) {
  const double e = std::exp(1.0);
  EXPECT_DOUBLE_EQ(query_scale_value(QueryScale::InvSqrtDim, 64), 1.0 / 8.0);
  EXPECT_DOUBLE_EQ(query_scale_value(QueryScale::ReGLAVariance, 64), 1.0 / (e * std::sqrt(64 * (e * e - 1))));
  EXPECT_DOUBLE_EQ(query_scale_value(QueryScale::None, 64), 1.0);
}

TEST(LinearAttentionOptions, SumNormalizationRejectsValueDimDecay) {
  Generator gen(1);
  for (const GateConfig gate : {GateConfig{.kind = GateKind::FastDecay}, GateConfig{.kind = GateKind::ReGLA}}) {
    LinearAttentionConfig c = plain();
    c.gate = gate;
    c.sum_normalization = true;
    EXPECT_LINEA_ERROR(LinearAttention(c, gen), "sum normalization", "value");
  }
  // A key-dim ReGLA gate and a scalar gate are fine.
  LinearAttentionConfig c = plain();
  c.gate = {.kind = GateKind::ReGLA, .regla_dim = DecayDim::Key};
  c.sum_normalization = true;
  EXPECT_NO_THROW(LinearAttention(c, gen));
}

TEST(LinearAttentionOptions, BadInputsAreErrors) {
  Generator gen(1);
  LinearAttentionConfig c = plain();
  LinearAttention layer(c, gen);
  EXPECT_LINEA_ERROR(layer.forward(randn({2, 5, kD + 1})), "LinearAttention", "[2, 5, 13]");
  auto state = layer.init_state(2);
  EXPECT_LINEA_ERROR(layer.step(randn({3, kD}), *state), "LinearAttention", "batch 2");
  c.head_dim = 0;
  EXPECT_LINEA_ERROR(LinearAttention(c, gen), "LinearAttention", "positive");
  EXPECT_LINEA_ERROR(parse_linear_attention_preset("regal"), "unknown preset", "regla");
}

TEST(LinearAttentionOptions, PresetsAreWhatTheyClaim) {
  for (const auto p : all_linear_attention_presets()) {
    EXPECT_EQ(parse_linear_attention_preset(preset_name(p)), p);
    std::printf("[preset] %-10s %s\n", preset_name(p).c_str(), describe(linear_attention_preset(p, 768, 12, 64)).c_str());
  }
  const LinearAttentionConfig r = linear_attention_preset(LinearAttentionPreset::Regla, 768, 12, 64);
  EXPECT_EQ(r.feature_map.kind, FeatureMapKind::NormalizedExp);
  EXPECT_EQ(r.gate.kind, GateKind::ReGLA);
  EXPECT_EQ(r.gate.regla_dim, DecayDim::Value);
  EXPECT_EQ(r.scale, QueryScale::ReGLAVariance);
  EXPECT_EQ(r.output_norm, OutputNorm::RMS);
  EXPECT_EQ(r.key_max, KeyMaxMode::Prefix);
  EXPECT_FALSE(r.sum_normalization);
  EXPECT_EQ(r.gate.log_decay_floor, -20.0);
}

// ---- the fused maps against their composite reference -------------------------------------------

// ReGLA's normalized exp map with the prefix key max and its refined gate run as fused ops by
// default (autograd/ops.h: normalized_exp, refined_log_gate); with fused_feature_map and
// gate.fused off the layer takes the composite chains they replace. Both give the same outputs
// and gradients (input and every parameter) in both forms, in float64 to 1e-12.
TEST(LinearAttentionFused, FusedMapsMatchTheCompositeReference) {
  LinearAttentionConfig regla = preset(LinearAttentionPreset::Regla);
  LinearAttentionConfig key_gate = regla;
  key_gate.gate.regla_dim = DecayDim::Key;
  LinearAttentionConfig no_norm = regla;
  no_norm.output_norm = OutputNorm::None;  // the key max's gradient undamped by a norm
  LinearAttentionConfig map_only = plain();
  map_only.feature_map.kind = FeatureMapKind::NormalizedExp;
  const std::pair<const char*, LinearAttentionConfig> cases[] = {
      {"regla", regla}, {"regla key dim", key_gate}, {"regla no norm", no_norm}, {"map only", map_only}};
  for (const auto& [name, config] : cases) {
    LinearAttentionConfig composite = config;
    composite.fused_feature_map = false;
    composite.gate.fused = false;
    auto fused_layer = build(config, kFloat64), reference = build(composite, kFloat64);
    Generator gen(31);
    const Tensor x = clone(randn({2, 21, kD}, kFloat64, &gen) * 2.0).requires_grad_();
    const Tensor u = randn(x.shape(), kFloat64, &gen);
    auto outputs_and_gradients = [&](LinearAttention& layer, bool decode) {
      std::vector<Tensor> inputs = {x};
      for (const Tensor& p : layer.parameters()) inputs.push_back(p);
      const Tensor y = decode ? decode_all(layer, x) : layer.forward(x);
      std::vector<Tensor> all = {y};
      for (const Tensor& g : grad(sum(y * u), inputs, Tensor(), false, true)) all.push_back(g);
      return all;
    };
    for (const bool decode : {false, true}) {
      const auto fused = outputs_and_gradients(*fused_layer, decode), ref = outputs_and_gradients(*reference, decode);
      ASSERT_EQ(fused.size(), ref.size());
      for (size_t i = 0; i < fused.size(); ++i) {
        ASSERT_EQ(fused[i].defined(), ref[i].defined()) << name << " tensor " << i;
        if (fused[i].defined())
          EXPECT_LE(relative_diff(fused[i], ref[i]), 1e-12)
              << name << (decode ? " decoding" : " forward") << (i == 0 ? ": output" : ": gradient ") << i;
      }
    }
  }
}

// ---- the key max ----------------------------------------------------------------------------------

// ReGLA with the paper's global key max (eq. 12) is not causal: the max is one scalar per
// (sequence, head), which the RMSNorm would cancel with eps = 0 but does not with eps = 1e-6,
// because exp(k - M) and the variance scale make the pre-norm output tiny
// (docs/math.md#the-global-max-and-what-it-leaks). Measured in float64, T = 256, d = 64,
// unit-scale inputs; nn/linear_attention/README.md quotes the numbers.
TEST(LinearAttentionKeyMax, GlobalMaxLeaksTheFutureThroughTheNormEps) {
  const int64_t T = 256, d = 64;
  Generator gen(21);
  const Tensor x = randn({1, T, d}, kFloat64, &gen);
  // Only the last token changes, to a larger one, so the global max moves.
  const Tensor changed = cat({narrow(x, 1, 0, T - 1), randn({1, 1, d}, kFloat64, &gen) * 3.0}, 1);
  struct Measured {
    double leak, decode;
  };
  auto measure = [&](KeyMaxMode mode, double eps) {
    LinearAttentionConfig c = linear_attention_preset(LinearAttentionPreset::Regla, d, 1, d);
    c.key_max = mode;
    c.output_norm_eps = eps;
    auto layer = build(c, kFloat64, 8);
    const Tensor y = layer->forward(x), y_changed = layer->forward(changed);
    const Tensor before = narrow(y, 1, 0, T - 1), after = narrow(y_changed, 1, 0, T - 1);
    return Measured{relative_diff(after, before), relative_diff(y, decode_all(*layer, x))};
  };
  const Measured global = measure(KeyMaxMode::Global, 1e-6), prefix = measure(KeyMaxMode::Prefix, 1e-6);
  const Measured global_tiny_eps = measure(KeyMaxMode::Global, 1e-12);
  std::printf("[key max] global eps=1e-6: last token moves earlier outputs by %.3g, forward vs decode %.3g\n",
              global.leak, global.decode);
  std::printf("[key max] global eps=1e-12: %.3g and %.3g; prefix eps=1e-6: %.3g and %.3g\n", global_tiny_eps.leak,
              global_tiny_eps.decode, prefix.leak, prefix.decode);
  EXPECT_GT(global.leak, 1e-2);          // the future visibly changes the past
  EXPECT_GT(global.decode, 1e-3);        // and training does not match decoding
  EXPECT_LT(global_tiny_eps.leak, global.leak * 1e-2);  // the leak is the eps's doing
  EXPECT_LT(prefix.leak, 1e-12);
  EXPECT_LT(prefix.decode, 1e-9);
}

// The exact relation behind the leak (docs/math.md#the-global-max-and-what-it-leaks): per token,
// the decoded output is the global-max output times e^(M - m_t), M the max over the whole
// sequence and m_t the running max. Checked with one head and no output norm, so the output is
// linear in h.
TEST(LinearAttentionKeyMax, DecodingIsTheGlobalOutputRescaledByTheRunningMax) {
  const int64_t T = 20, d = 6;
  LinearAttentionConfig c = small(linear_attention_preset(LinearAttentionPreset::Regla, d, 1, d));
  c.key_max = KeyMaxMode::Global;
  c.output_norm = OutputNorm::None;
  auto layer = build(c, kFloat64);
  Generator gen(23);
  const Tensor x = randn({2, T, d}, kFloat64, &gen);
  Tensor w_k;
  for (const auto& p : layer->named_parameters())
    if (p.name == "k_proj.weight") w_k = p.tensor;
  const Tensor mu = amax(matmul(x, t(w_k)), {-1}, true);  // (B, T, 1): each token's key max
  const Tensor factor = exp(amax(mu, {1}, true) - running_max(mu, 1));
  EXPECT_TRUE(all_close(decode_all(*layer, x), layer->forward(x) * factor, 1e-10, 1e-14));
  EXPECT_GT(max(factor).item(), 1.5);  // the relation is not trivially 1
}

}  // namespace
}  // namespace linea::nn::linear
