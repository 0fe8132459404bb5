// Gradient-check rows of the linear-attention family (nn/linear_attention/linear_attention.h): every preset,
// every feature map and every gate, w.r.t. the input and all parameters, in float64. Sizes are
// small but keep what matters: T = 5 with chunks of 4 (a padded last chunk) in sub-blocks of 2,
// two heads, and for the decoding form the token-by-token step.
#include <string>

#include "nn/gradcheck_cases.h"
#include "nn/gradcheck_module.h"
#include "nn/linear_attention/linear_attention.h"

namespace linea::nn {

namespace {

using Cases = std::vector<gradcheck::Case>;
using Inputs = std::vector<Tensor>;
using linear::LinearAttention;
using linear::LinearAttentionConfig;

constexpr int64_t kB = 1, kT = 5, kD = 4, kHeads = 2, kHeadDim = 2;

LinearAttentionConfig small(LinearAttentionConfig c) {
  c.scan = {.chunk_size = 4, .sub_block = 2};
  c.gate.gla_low_rank = c.gate.gla_low_rank > 0 ? 2 : 0;
  return c;
}

LinearAttentionConfig base_config() {
  LinearAttentionConfig c;
  c.d_model = kD;
  c.heads = kHeads;
  c.head_dim = kHeadDim;
  return c;
}

// The parallel form, or with `decode` the recurrent one token by token.
void add_row(Cases& cases, const std::string& situation, const LinearAttentionConfig& config, bool decode = false) {
  const LinearAttentionConfig c = small(config);
  cases.push_back(module_case(
      "LinearAttention/" + situation, [c](Generator& gen) { return std::make_shared<LinearAttention>(c, gen); },
      inputs_of({{kB, kT, kD}}),
      [decode](LinearAttention& m, const Inputs& x) { return mixer_output(m, x[0], decode); }));
}

}  // namespace

void add_linear_attention_cases(Cases& cases) {
  for (const auto preset : linear::all_linear_attention_presets())
    add_row(cases, linear::preset_name(preset), linear::linear_attention_preset(preset, kD, kHeads, kHeadDim));
  add_row(cases, "regla_decode", linear::linear_attention_preset(linear::LinearAttentionPreset::Regla, kD, kHeads, kHeadDim),
          /*decode=*/true);
  // ReGLA's map, key max and gate through their composite chains, the fused ops' reference.
  LinearAttentionConfig composite = linear::linear_attention_preset(linear::LinearAttentionPreset::Regla, kD, kHeads, kHeadDim);
  composite.fused_feature_map = false;
  composite.gate.fused = false;
  add_row(cases, "regla_composite_maps", composite);

  // Each feature map with no gate and no sum normalization, so only the map differs.
  using linear::FeatureMapKind;
  for (const FeatureMapKind kind :
       {FeatureMapKind::Identity, FeatureMapKind::Relu, FeatureMapKind::EluPlusOne, FeatureMapKind::RandomFourier,
        FeatureMapKind::FavorPlus, FeatureMapKind::Hedgehog, FeatureMapKind::NormalizedExp}) {
    LinearAttentionConfig c = base_config();
    c.feature_map.kind = kind;
    add_row(cases, "map_" + linear::feature_map_name(kind), c);
  }
  for (const FeatureMapKind base : {FeatureMapKind::Relu, FeatureMapKind::NormalizedExp}) {
    LinearAttentionConfig c = base_config();
    c.feature_map = {.kind = FeatureMapKind::Product, .product_base = base, .product_second_dim = 2};
    add_row(cases, "map_product_" + linear::feature_map_name(base), c);
  }

  // Each gate on the normalized exp map, so its decays meet the running key max's.
  using linear::GateKind;
  struct GateRow {
    std::string name;
    linear::GateConfig gate;
  };
  const std::vector<GateRow> gates = {
      {"scalar", {.kind = GateKind::Scalar}},
      {"fast_decay", {.kind = GateKind::FastDecay}},
      {"gla", {.kind = GateKind::GLA}},
      {"gla_low_rank", {.kind = GateKind::GLA, .gla_low_rank = 2}},
      {"regla_value", {.kind = GateKind::ReGLA, .regla_dim = linear::DecayDim::Value}},
      {"regla_key", {.kind = GateKind::ReGLA, .regla_dim = linear::DecayDim::Key}},
  };
  for (const GateRow& g : gates) {
    LinearAttentionConfig c = base_config();
    c.feature_map.kind = FeatureMapKind::NormalizedExp;
    c.gate = g.gate;
    add_row(cases, "gate_" + g.name, c);
  }

  // The remaining options: the paper's global key max, a LayerNorm output, no output norm (so
  // the running max's gradient is not damped by a norm), sum normalization with a key-dim gate.
  LinearAttentionConfig global = linear::linear_attention_preset(linear::LinearAttentionPreset::Regla, kD, kHeads, kHeadDim);
  global.key_max = linear::KeyMaxMode::Global;
  add_row(cases, "regla_global_key_max", global);
  LinearAttentionConfig layer_norm = global;
  layer_norm.key_max = linear::KeyMaxMode::Prefix;
  layer_norm.output_norm = linear::OutputNorm::Layer;
  add_row(cases, "regla_layer_norm", layer_norm);
  LinearAttentionConfig no_norm = layer_norm;
  no_norm.output_norm = linear::OutputNorm::None;
  add_row(cases, "regla_no_norm", no_norm);
  LinearAttentionConfig summed = base_config();
  summed.feature_map.kind = FeatureMapKind::EluPlusOne;
  summed.gate.kind = GateKind::GLA;
  summed.sum_normalization = true;
  add_row(cases, "sum_norm_gla_gate", summed);
}

}  // namespace linea::nn
