// The table of layer letters: how each letter of a model's pattern becomes a mixer, and which
// per-letter options (ModelConfig::layers) it reads. Adding a layer type is one row here.
#include "nn/attention/softmax_attention.h"
#include "nn/layer_options.h"
#include "nn/linear_attention/deltanet.h"
#include "nn/linear_attention/linear_attention.h"
#include "nn/model.h"
#include "nn/pooling/wqkv.h"
#include "nn/recurrent/griffin.h"

namespace linea::nn {

namespace {

// The option "scan" (chunked, sequential, composite); "fused_scan": false, from configs written
// before the choice had three values, means composite.
linear::ScanKernel scan_kernel_option(LayerOptions& o, linear::ScanKernel kernel) {
  if (!o.get<bool>("fused_scan", true)) kernel = linear::ScanKernel::Composite;
  return linear::parse_scan_kernel(o.get<std::string>("scan", linear::scan_kernel_name(kernel)));
}

// A letter's mixer: its Config with the model's width, the rest as `read` takes it from the
// letter's options; an option nothing read is an error (LayerOptions::finish).
template <class Mixer, class Config>
std::shared_ptr<SequenceMixer> make_mixer(char letter, const ModelConfig& config, Generator& gen,
                                          const std::function<void(LayerOptions&, Config&)>& read) {
  LayerOptions o(config.options_for(letter), letter);
  Config c;
  c.d_model = config.d_model;
  read(o, c);
  o.finish();
  return std::make_shared<Mixer>(c, gen);
}

std::shared_ptr<SequenceMixer> make_softmax(const ModelConfig& config, Generator& gen) {
  return make_mixer<SoftmaxAttention, SoftmaxAttentionConfig>('S', config, gen, [&](LayerOptions& o, auto& c) {
    c.heads = o.get<int64_t>("heads", config.heads);
    c.head_dim = o.get<int64_t>("head_dim", config.head_dim);
    c.kv_heads = o.get<int64_t>("kv_heads", 0);
    c.rope = o.get<bool>("rope", true);
    c.rope_base = o.get<double>("rope_base", 10000.0);
    c.rotary_dim = o.get<int64_t>("rotary_dim", 0);
    c.window = o.get<int64_t>("window", 0);
    c.fused = o.get<bool>("fused", c.fused);
  });
}

// A linear-attention letter: the named preset of the ReGLA paper, then the letter's overrides.
std::function<std::shared_ptr<SequenceMixer>(const ModelConfig&, Generator&)> linear_maker(
    char letter, linear::LinearAttentionPreset preset) {
  return [letter, preset](const ModelConfig& config, Generator& gen) -> std::shared_ptr<SequenceMixer> {
    LayerOptions o(config.options_for(letter), letter);
    const int64_t heads = o.get<int64_t>("heads", config.heads);
    const int64_t head_dim = o.get<int64_t>("head_dim", config.head_dim ? config.head_dim : config.d_model / heads);
    linear::LinearAttentionConfig c = linear::linear_attention_preset(preset, config.d_model, heads, head_dim);
    c.key_dim = o.get<int64_t>("feature_dim", c.key_dim);
    c.feature_map.kind = linear::parse_feature_map(o.get<std::string>("feature_map", linear::feature_map_name(c.feature_map.kind)));
    c.feature_map.num_features = o.get<int64_t>("num_features", c.feature_map.num_features);
    c.gate.kind = linear::parse_gate(o.get<std::string>("gate", linear::gate_name(c.gate.kind)));
    c.gate.regla_dim = linear::parse_decay_dim(o.get<std::string>("gate_dim", linear::decay_dim_name(c.gate.regla_dim)));
    c.gate.log_decay_floor = o.get<double>("log_decay_floor", c.gate.log_decay_floor);
    c.gate.bias_init = o.get<double>("gate_bias", c.gate.bias_init);
    c.sum_normalization = o.get<bool>("sum_normalization", c.sum_normalization);
    c.output_norm = linear::parse_output_norm(o.get<std::string>("output_norm", linear::output_norm_name(c.output_norm)));
    c.scale = linear::parse_query_scale(o.get<std::string>("scale", linear::query_scale_name(c.scale)));
    c.key_max = linear::parse_key_max(o.get<std::string>("key_max", linear::key_max_name(c.key_max)));
    c.scan.chunk_size = o.get<int64_t>("chunk_size", c.scan.chunk_size);
    c.scan.kernel = scan_kernel_option(o, c.scan.kernel);
    c.fused_feature_map = c.gate.fused = c.fused_step = o.get<bool>("fused", true);
    o.finish();
    return std::make_shared<linear::LinearAttention>(c, gen);
  };
}

std::shared_ptr<SequenceMixer> make_deltanet(const ModelConfig& config, Generator& gen) {
  return make_mixer<linear::DeltaNet, linear::DeltaNetConfig>('D', config, gen, [&](LayerOptions& o, auto& c) {
    c.heads = o.get<int64_t>("heads", config.heads);
    c.head_dim = o.get<int64_t>("head_dim", config.head_dim);
    c.feature_map = linear::parse_delta_feature_map(
        o.get<std::string>("feature_map", linear::delta_feature_map_name(c.feature_map)));
    c.output_norm = o.get<bool>("output_norm", c.output_norm);
    c.chunk_size = o.get<int64_t>("chunk_size", c.chunk_size);
  });
}

std::shared_ptr<SequenceMixer> make_griffin(const ModelConfig& config, Generator& gen) {
  return make_mixer<GriffinBlock, GriffinConfig>('U', config, gen, [&](LayerOptions& o, auto& c) {
    c.conv_width = o.get<int64_t>("conv_width", c.conv_width);
    c.lru.width = o.get<int64_t>("width", 0);
    c.lru.heads = o.get<int64_t>("heads", config.heads);
    c.lru.a_min = o.get<double>("a_min", c.lru.a_min);
    c.lru.a_max = o.get<double>("a_max", c.lru.a_max);
    c.lru.scan.chunk_size = o.get<int64_t>("chunk_size", c.lru.scan.chunk_size);
    c.lru.scan.kernel = scan_kernel_option(o, c.lru.scan.kernel);
  });
}

// One head by default, as in the seed, whatever the model's head count.
std::shared_ptr<SequenceMixer> make_wqkv(const ModelConfig& config, Generator& gen) {
  return make_mixer<WqkvPooling, WqkvConfig>('W', config, gen, [](LayerOptions& o, auto& c) {
    c.heads = o.get<int64_t>("heads", c.heads);
    c.head_dim = o.get<int64_t>("head_dim", c.head_dim);
    c.slots = o.get<int64_t>("slots", c.slots);
    c.scale = parse_wqkv_scale(o.get<std::string>("scale", wqkv_scale_name(c.scale)));
    c.scan.chunk_size = o.get<int64_t>("chunk_size", c.scan.chunk_size);
    c.scan.kernel = scan_kernel_option(o, c.scan.kernel);
  });
}

}  // namespace

const std::vector<LayerKind>& layer_kinds() {
  using P = linear::LinearAttentionPreset;
  static const std::vector<LayerKind> kinds = {
      {'S', "softmax", "softmax attention (RoPE, grouped-query, optional sliding window)", make_softmax},
      {'L', "linear", "linear attention, ELU+1 map, sum-normalized (Katharopoulos et al. 2020)", linear_maker('L', P::LaElu)},
      {'H', "hedgehog", "linear attention with Hedgehog's learnable softmax-like map", linear_maker('H', P::Hedgehog)},
      {'A', "rfa", "random feature attention with a scalar gate", linear_maker('A', P::Rfa)},
      {'F', "fast-decay", "linear attention with Fast Decay's outer-product gate", linear_maker('F', P::FastDecay)},
      {'G', "gla", "gated linear attention (key-dimension gate)", linear_maker('G', P::Gla)},
      {'R', "regla", "ReGLA: normalized exp map, variance scale, refined gate (value dim)", linear_maker('R', P::Regla)},
      {'D', "deltanet", "DeltaNet: delta-rule state update, L2-normalized keys (Schlag et al. 2021)", make_deltanet},
      {'U', "griffin", "Griffin recurrent block: conv and RG-LRU times a GeLU branch (De et al. 2024)", make_griffin},
      {'W', "wqkv", "WQKV attention pooling: each token attends to softmax-pooled memory slots", make_wqkv},
  };
  return kinds;
}

}  // namespace linea::nn
