#include "nn/linear_attention/linear_attention.h"

#include <cmath>
#include <sstream>

#include "nn/layers/fused_product.h"
#include "nn/names.h"
#include "tensor/error.h"

namespace linea::nn::linear {

namespace {

// a + b where either may be undefined (absent decays add nothing).
Tensor add_defined(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return a + b;
}

Tensor mul_defined(const Tensor& x, const Tensor& factor) { return factor.defined() ? x * factor : x; }

void check_sizes(const LinearAttentionConfig& c) {
  const char* layer = "LinearAttention";
  LINEA_CHECK(c.d_model > 0 && c.heads > 0 && c.head_dim > 0, layer,
              "d_model, heads and head_dim must be positive, got ", c.d_model, ", ", c.heads, ", ", c.head_dim);
  LINEA_CHECK(c.key_dim >= 0, layer, "key_dim must be >= 0 (0: head_dim), got ", c.key_dim);
  LINEA_CHECK(c.sum_norm_eps >= 0 && c.output_norm_eps >= 0, layer, "eps values must be non-negative");
}

// c_t shares S_t's decays; a per-channel value decay has no entry for the extra ones column
// (what would decay c?), so sum normalization only goes with scalar or key-dim decays.
void check_sum_normalization(const LinearAttentionConfig& c, const Gate* gate) {
  LINEA_CHECK(!(c.sum_normalization && gate != nullptr && gate->decays_value_channels()), "LinearAttention",
              "sum normalization needs a gate without a per-channel value-dim decay, but gate '",
              gate_name(c.gate.kind), "' decays the value dim (",
              c.gate.kind == GateKind::ReGLA ? "use regla_dim = key, or " : "", "turn sum normalization off)");
}

}  // namespace

double query_scale_value(QueryScale scale, int64_t feature_dim) {
  const double m = static_cast<double>(feature_dim), e = std::exp(1.0);
  switch (scale) {
    case QueryScale::InvSqrtDim: return 1.0 / std::sqrt(m);
    // Var sum_i e^{x_i} e^{y_i} = m e^2 (e^2 - 1) for x, y ~ N(0, I): divide by its square root.
    case QueryScale::ReGLAVariance: return 1.0 / (e * std::sqrt(m * (e * e - 1.0)));
    case QueryScale::None: return 1.0;
  }
  fail("LinearAttention", "unknown query scale");
}

LinearAttention::LinearAttention(const LinearAttentionConfig& config, Generator& gen)
    : config_(config), key_dim_(config.key_dim > 0 ? config.key_dim : config.head_dim) {
  check_sizes(config);
  const int64_t D = config.d_model, H = config.heads, dv = config.head_dim;
  // Xavier-uniform projections (GLA's choice, up to its gain): the papers leave it open.
  const LinearOptions proj{.bias = config.projection_bias, .init = LinearInit::XavierUniform};
  q_proj_ = register_module("q_proj", std::make_shared<Linear>(D, H * key_dim_, gen, proj));
  k_proj_ = register_module("k_proj", std::make_shared<Linear>(D, H * key_dim_, gen, proj));
  v_proj_ = register_module("v_proj", std::make_shared<Linear>(D, H * dv, gen, proj));
  feature_map_ = register_module("feature_map", make_feature_map(config.feature_map, H, key_dim_, gen));
  gate_ = make_gate(config.gate, D, H, feature_map_->feature_dim(), dv, gen);
  if (gate_) register_module("gate", gate_);
  check_sum_normalization(config, gate_.get());
  if (config.output_norm != OutputNorm::None) {
    const HeadNormOptions norm{.kind = config.output_norm == OutputNorm::RMS ? NormKind::RMS : NormKind::Layer,
                               .weight = HeadNormWeight::Shared,
                               .eps = config.output_norm_eps};
    norm_ = register_module("norm", std::make_shared<HeadNorm>(H, dv, norm));
  }
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(H * dv, D, gen, proj));
  scale_ = query_scale_value(config.scale, feature_map_->feature_dim());
}

Tensor LinearAttention::heads_first(const Tensor& y, int64_t width) const {
  return permute(reshape(y, {y.size(0), y.size(1), config_.heads, width}), {0, 2, 1, 3});
}

LinearAttention::ScanInputs LinearAttention::prepare(const Tensor& x, const Tensor& previous_key_max,
                                                     KeyMaxMode mode) {
  // q, k, v and the gate's projections of x as one product (nn/layers/stacked_projection.h).
  std::vector<StackedProjection::Part> parts = {{q_proj_.get(), true}, {k_proj_.get(), true}, {v_proj_.get(), true}};
  const std::vector<StackedProjection::Part> gate_parts = gate_ ? gate_->products_of_x() : std::vector<StackedProjection::Part>{};
  parts.insert(parts.end(), gate_parts.begin(), gate_parts.end());
  const std::vector<Tensor> y = sequence_projections_.forward(parts, x);  // (B, T, width) each
  const Tensor q = heads_first(y[0], key_dim_);  // (B, H, T, d)
  const Tensor k = heads_first(y[1], key_dim_);
  Tensor v = heads_first(y[2], config_.head_dim);  // (B, H, T, dv)

  ScanInputs in;
  Tensor key_decay;  // the running max's scalar log decay lambda, (B, H, T, 1)
  if (fuses_normalized_exp(mode)) {
    in.q = normalized_exp(q, NormalizedExpMode::RowMax, scale_).features;  // (B, H, T, m)
    const NormalizedKeys keys = prefix_normalized_keys(k, previous_key_max);
    in.k = keys.features;
    key_decay = keys.norm.log_decay;
    in.last_key_max = keys.norm.last_max;
  } else {
    in.q = feature_map_->forward(q, Role::Query) * scale_;
    in.k = feature_map_->forward(k, Role::Key);
    if (const Tensor mu = feature_map_->key_log_shift(k); mu.defined()) {
      const KeyNormalization norm = normalize_keys(mu, mode, previous_key_max);
      in.k = in.k * norm.key_scale;
      key_decay = norm.log_decay;
      in.last_key_max = norm.last_max;
    }
  }
  const GateOutput g = !gate_              ? GateOutput{}
                       : gate_parts.empty() ? gate_->forward(x)
                                            : gate_->forward_from_products({y.begin() + 3, y.end()});
  in.k = mul_defined(in.k, g.key_scale);
  // lambda is a scalar, so it may join either side; the scan folds a scalar key decay into a
  // per-channel value decay when that is the only other one.
  in.gk = add_defined(g.gk, key_decay);
  in.gv = g.gv;
  if (config_.sum_normalization) {
    // c rides the scan as S's extra row: a value column of ones accumulates phi(k) under the same
    // decays, and that row of o is c^T phi(q).
    Shape ones_shape = v.shape();
    ones_shape.back() = 1;
    v = cat({v, ones(ones_shape, {v.dtype(), v.device()})}, -1);
  }
  in.v = v;
  return in;
}

bool LinearAttention::fuses_normalized_exp(KeyMaxMode mode) const {
  return config_.fused_feature_map && config_.feature_map.kind == FeatureMapKind::NormalizedExp &&
         mode == KeyMaxMode::Prefix;
}

Tensor LinearAttention::finish(const Tensor& o) { return out_proj_->forward(output_heads(o)); }

Tensor LinearAttention::output_heads(const Tensor& o_in) const {
  Tensor o = o_in;  // (B, T, H, dv (+1))
  if (config_.sum_normalization) {
    const int64_t dv = config_.head_dim;
    o = narrow(o, -1, 0, dv) / (narrow(o, -1, dv, 1) + config_.sum_norm_eps);
  }
  if (norm_) o = norm_->forward(o);
  return reshape(o, {o.size(0), o.size(1), config_.heads * config_.head_dim});
}

Tensor LinearAttention::forward(const Tensor& x) {
  check_sequence_input(x, config_.d_model, "LinearAttention");
  const ScanInputs in = prepare(x, Tensor(), config_.key_max);
  const Tensor o = scan(in.q, in.k, in.v, in.gk, in.gv, Tensor(), nullptr, config_.scan);  // (B, H, T, .)
  return finish(transpose(o, 1, 2));
}

std::unique_ptr<DecodeState> LinearAttention::init_state(int64_t batch) const {
  auto s = std::make_unique<LinearAttentionState>();
  const Tensor& w = q_proj_->weight;
  s->state = empty({batch, config_.heads, state_value_dim(), feature_dim()}, w.dtype(), w.device());
  s->state_unwritten = true;  // zeros, once something reads them (LinearAttentionState)
  return s;
}

Tensor LinearAttention::step(const Tensor& x, DecodeState& state_in) {
  LinearAttentionState* s = &step_state<LinearAttentionState>(x, state_in, config_.d_model, "LinearAttention",
                                                              &LinearAttentionState::state);
  s->written_state();
  if (fused_step_applies()) return fused_step(x, *s);
  const ScanInputs in = prepare(unsqueeze(x, 1), s->key_max, KeyMaxMode::Prefix);
  // The one token through the fused scan's step-by-step kernel: the decays, the state update and
  // the read-out in one launch (scan_step, the composite reference, takes about six; decoding
  // is bound by launches).
  ScanOptions one_launch = config_.scan;
  one_launch.kernel = ScanKernel::Sequential;
  Tensor last_state;
  const Tensor o = scan(in.q, in.k, in.v, in.gk, in.gv, s->state, &last_state, one_launch);  // (B, H, 1, .)
  s->state = last_state;
  s->key_max = in.last_key_max;
  ++s->position;
  return select(finish(transpose(o, 1, 2)), 1, 0);
}

Tensor LinearAttention::residual_step(const Tensor& x, const Norm& norm, DecodeState& state_in) {
  if (!fused_step_applies()) return SequenceMixer::residual_step(x, norm, state_in);
  LinearAttentionState* s = &step_state<LinearAttentionState>(x, state_in, config_.d_model, "LinearAttention",
                                                              &LinearAttentionState::state);
  s->written_state();
  return fused_step(x, *s, &norm, x);
}

bool LinearAttention::fused_step_applies() const {
  if (!config_.fused_step || is_grad_enabled() || config_.sum_normalization) return false;
  if (config_.output_norm == OutputNorm::Layer || config_.gate.kind == GateKind::Scalar) return false;
  return config_.feature_map.kind == FeatureMapKind::Identity || fuses_normalized_exp(KeyMaxMode::Prefix);
}

Tensor LinearAttention::fused_step(const Tensor& x, LinearAttentionState& s, const Norm* input_norm,
                                   const Tensor& residual) {
  // Every projection of x in one product: q, k, v, then the gate's (which the kernel finishes,
  // biases included), where the gate lets the kernel compute it.
  std::vector<StackedProjection::Part> parts = {{q_proj_.get(), true}, {k_proj_.get(), true}, {v_proj_.get(), true}};
  auto stack = [&](const Linear* linear) {
    parts.push_back({linear, false});
    return parts.size() - 1;
  };
  std::optional<RefinedGateProjections> refined;
  std::optional<LogSigmoidGateProjections> sigmoid;
  if (gate_) {
    refined = gate_->refined_projections();
    sigmoid = gate_->log_sigmoid_projections();
  }
  if (refined && !(refined->forget && refined->refine)) refined.reset();
  size_t forget_at = 0, refine_at = 0, key_gate_at = 0, value_gate_at = 0;
  if (refined) {
    forget_at = stack(refined->forget);
    refine_at = stack(refined->refine);
  } else if (sigmoid) {
    if (sigmoid->key) key_gate_at = stack(sigmoid->key_down ? sigmoid->key_down : sigmoid->key);
    if (sigmoid->value) value_gate_at = stack(sigmoid->value);
  }
  const std::vector<Tensor> y = step_projections_.forward(parts, x, input_norm);  // (B, width) each
  const int64_t B = x.size(0), H = config_.heads;
  auto per_head = [&](const Tensor& t) { return reshape(t, {B, H, t.size(-1) / H}); };
  auto token = [](const Tensor& t) { return t.defined() ? select(t, 2, 0) : t; };  // (B, H, 1, w) -> (B, H, w)

  LinearStepInputs in{.q = per_head(y[0]), .k = per_head(y[1]), .v = per_head(y[2])};
  if (refined) {
    in.gate_a = per_head(y[forget_at]);
    in.gate_c = per_head(y[refine_at]);
    in.gate_bias_a = refined->forget->bias;
    in.gate_bias_c = refined->refine->bias;
  } else if (sigmoid) {
    if (sigmoid->key) {
      // GLA's low-rank gate: the stacked product was its first factor; the second reads it.
      const Tensor pre = sigmoid->key_down ? sigmoid->key->forward_without_bias(y[key_gate_at]) : y[key_gate_at];
      in.key_gate = per_head(pre);
      in.key_gate_bias = sigmoid->key->bias;
    }
    if (sigmoid->value) {
      in.value_gate = per_head(y[value_gate_at]);
      in.value_gate_bias = sigmoid->value->bias;
    }
  } else if (gate_) {
    const GateOutput g = gate_->forward(unsqueeze(input_norm ? input_norm->forward(x) : x, 1));
    in.gk = token(g.gk);
    in.gv = token(g.gv);
  }
  in.key_max = s.key_max;
  in.state = s.state;
  if (norm_) in.norm_weight = norm_->weight;
  const LinearStepOptions options{
      .map = config_.feature_map.kind == FeatureMapKind::Identity ? StepFeatureMap::Identity : StepFeatureMap::NormalizedExp,
      .refined_gate_on_keys = refined && refined->dim == DecayDim::Key,
      .scale = scale_,
      .gate_floor = refined ? refined->floor : (sigmoid ? sigmoid->floor : config_.gate.log_decay_floor),
      .gate_normalizer = sigmoid ? sigmoid->normalizer : 1.0,
      .output_norm = norm_ != nullptr,
      .norm_eps = config_.output_norm_eps};
  // The state is the layer's own (prefill() and init_state() made it): updated in place, so that a
  // step allocates nothing for it and a captured step needs no copy back (train/decode_graph.h).
  const bool in_place = s.state.is_contiguous() && (!s.key_max.defined() || s.key_max.is_contiguous());
  const LinearStepResult r =
      linear_attention_step(in, options, in_place ? StateWrite::InPlace : StateWrite::NewTensors);
  s.state = r.state;
  if (r.key_max.defined()) s.key_max = r.key_max;
  ++s.position;
  return fused_product(*out_proj_, reshape(r.out, {B, H * config_.head_dim}), {.residual = residual});
}

Tensor LinearAttention::prefill_mixed(const Tensor& x, DecodeState& state_in, bool last_only) {
  LinearAttentionState* s = &prefill_state<LinearAttentionState>(x, state_in, config_.d_model, "LinearAttention",
                                                                 &LinearAttentionState::state);
  const ScanInputs in = prepare(x, s->key_max, KeyMaxMode::Prefix);
  Tensor last_state;
  const Tensor start = s->state_unwritten ? Tensor() : s->state;  // undefined: the scan starts from zeros
  const Tensor o = scan(in.q, in.k, in.v, in.gk, in.gv, start, &last_state, config_.scan);  // (B, H, T, .)
  s->state = last_state;
  s->state_unwritten = false;
  s->key_max = in.last_key_max;
  s->position += x.size(1);
  own_storage(*s);
  return output_heads(transpose(last_only ? narrow(o, 2, o.size(2) - 1, 1) : o, 1, 2));
}

// ---- presets -------------------------------------------------------------------------------------

namespace {
const names::Table<LinearAttentionPreset> kPresetNames[] = {
    {LinearAttentionPreset::LaRelu, "la-relu"}, {LinearAttentionPreset::LaElu, "la-elu"},
    {LinearAttentionPreset::Hedgehog, "hedgehog"}, {LinearAttentionPreset::Rfa, "rfa"},
    {LinearAttentionPreset::FastDecay, "fast-decay"}, {LinearAttentionPreset::Gla, "gla"},
    {LinearAttentionPreset::Regla, "regla"},
};
}  // namespace

LinearAttentionConfig linear_attention_preset(LinearAttentionPreset preset, int64_t d_model, int64_t heads,
                                              int64_t head_dim) {
  LinearAttentionConfig c;
  c.d_model = d_model;
  c.heads = heads;
  c.head_dim = head_dim;
  c.output_norm = OutputNorm::RMS;
  auto sum_normalized = [&](FeatureMapKind map) {
    c.feature_map.kind = map;
    c.sum_normalization = true;
    c.scale = QueryScale::None;
  };
  switch (preset) {
    case LinearAttentionPreset::LaRelu: sum_normalized(FeatureMapKind::Relu); break;
    case LinearAttentionPreset::LaElu: sum_normalized(FeatureMapKind::EluPlusOne); break;
    case LinearAttentionPreset::Hedgehog: sum_normalized(FeatureMapKind::Hedgehog); break;
    case LinearAttentionPreset::Rfa:
      sum_normalized(FeatureMapKind::RandomFourier);
      c.gate.kind = GateKind::Scalar;
      break;
    case LinearAttentionPreset::FastDecay:
      c.feature_map.kind = FeatureMapKind::Identity;
      c.gate.kind = GateKind::FastDecay;
      c.scale = QueryScale::InvSqrtDim;
      break;
    case LinearAttentionPreset::Gla:
      c.feature_map.kind = FeatureMapKind::Identity;
      c.gate.kind = GateKind::GLA;
      c.gate.gla_low_rank = 16;
      c.scale = QueryScale::InvSqrtDim;
      break;
    case LinearAttentionPreset::Regla:
      c.feature_map.kind = FeatureMapKind::NormalizedExp;
      c.gate.kind = GateKind::ReGLA;
      c.gate.regla_dim = DecayDim::Value;
      c.scale = QueryScale::ReGLAVariance;
      c.key_max = KeyMaxMode::Prefix;
      break;
  }
  return c;
}

std::vector<LinearAttentionPreset> all_linear_attention_presets() {
  std::vector<LinearAttentionPreset> out;
  for (const auto& [p, name] : kPresetNames) out.push_back(p);
  return out;
}

std::string preset_name(LinearAttentionPreset preset) { return names::name_in(kPresetNames, preset); }

LinearAttentionPreset parse_linear_attention_preset(const std::string& name) {
  return names::parse_in(kPresetNames, name, "LinearAttention", "preset");
}

namespace {
const names::Table<OutputNorm> kNormNames[] = {
    {OutputNorm::None, "none"}, {OutputNorm::RMS, "rms"}, {OutputNorm::Layer, "layer"}};
const names::Table<QueryScale> kScaleNames[] = {
    {QueryScale::InvSqrtDim, "inv_sqrt_dim"}, {QueryScale::ReGLAVariance, "variance"}, {QueryScale::None, "none"}};
}  // namespace

std::string output_norm_name(OutputNorm norm) { return names::name_in(kNormNames, norm); }
OutputNorm parse_output_norm(const std::string& name) {
  return names::parse_in(kNormNames, name, "LinearAttention", "output norm");
}
std::string query_scale_name(QueryScale scale) { return names::name_in(kScaleNames, scale); }
QueryScale parse_query_scale(const std::string& name) {
  return names::parse_in(kScaleNames, name, "LinearAttention", "query scale");
}

std::string describe(const LinearAttentionConfig& c) {
  const int64_t d = c.key_dim > 0 ? c.key_dim : c.head_dim;
  std::ostringstream os;
  os << "map=" << feature_map_name(c.feature_map.kind);
  if (c.feature_map.kind == FeatureMapKind::Product) os << "[" << feature_map_name(c.feature_map.product_base) << "]";
  os << "(d=" << d << ",m=" << feature_dim_of(c.feature_map, d) << ") gate=" << gate_name(c.gate.kind);
  if (c.gate.kind == GateKind::ReGLA) os << "(" << decay_dim_name(c.gate.regla_dim) << " dim)";
  if (c.gate.kind == GateKind::GLA) os << "(rank=" << c.gate.gla_low_rank << ",tau=" << c.gate.gla_normalizer << ")";
  os << " sum_norm=" << (c.sum_normalization ? "on" : "off") << " norm=" << output_norm_name(c.output_norm)
     << " scale=" << query_scale_name(c.scale) << " key_max=" << key_max_name(c.key_max)
     << " floor=" << c.gate.log_decay_floor << " chunk=" << c.scan.chunk_size << " heads=" << c.heads
     << " head_dim=" << c.head_dim;
  return os.str();
}

}  // namespace linea::nn::linear
