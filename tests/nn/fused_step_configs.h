#pragma once
// The LinearAttention configurations the fused decoding step (linea::linear_attention_step)
// covers, at sizes that are not powers of two (q/k width apart from v width), with every
// parameter drawn at random: shared by the CPU test (fused against composite) and the CUDA one.
#include <string>
#include <vector>

#include "nn/linear_attention/linear_attention.h"
#include "autograd/ops.h"
#include "tensor/random.h"

namespace linea::testing {

struct NamedStepConfig {
  std::string name;
  nn::linear::LinearAttentionConfig config;
};

inline std::vector<NamedStepConfig> fused_step_configs(int64_t d_model, int64_t heads, int64_t head_dim,
                                                       int64_t key_dim) {
  using namespace nn::linear;
  auto preset = [&](LinearAttentionPreset p) {
    LinearAttentionConfig c = linear_attention_preset(p, d_model, heads, head_dim);
    c.key_dim = key_dim;
    return c;
  };
  std::vector<NamedStepConfig> configs;
  configs.push_back({"regla", preset(LinearAttentionPreset::Regla)});
  LinearAttentionConfig key_gate = preset(LinearAttentionPreset::Regla);
  key_gate.gate.regla_dim = DecayDim::Key;
  configs.push_back({"regla_key_gate", key_gate});
  LinearAttentionConfig no_norm = preset(LinearAttentionPreset::Regla);
  no_norm.output_norm = OutputNorm::None;
  configs.push_back({"regla_no_norm", no_norm});
  LinearAttentionConfig closed = preset(LinearAttentionPreset::Regla);
  closed.gate.bias_init = -30;  // log f far below the floor: every step at the floor
  configs.push_back({"regla_gate_at_floor", closed});
  LinearAttentionConfig open = preset(LinearAttentionPreset::Regla);
  open.gate.bias_init = 30;  // f within rounding of 1
  configs.push_back({"regla_gate_near_one", open});
  configs.push_back({"gla", preset(LinearAttentionPreset::Gla)});
  LinearAttentionConfig full_rank = preset(LinearAttentionPreset::Gla);
  full_rank.gate.gla_low_rank = 0;
  configs.push_back({"gla_full_rank", full_rank});
  LinearAttentionConfig fast_closed = preset(LinearAttentionPreset::FastDecay);
  fast_closed.gate.bias_init = -30;  // both factors at the floor
  configs.push_back({"fast_decay_at_floor", fast_closed});
  configs.push_back({"fast_decay", preset(LinearAttentionPreset::FastDecay)});
  LinearAttentionConfig biased = preset(LinearAttentionPreset::Gla);
  biased.projection_bias = true;
  configs.push_back({"gla_projection_bias", biased});
  LinearAttentionConfig plain;
  plain.d_model = d_model;
  plain.heads = heads;
  plain.head_dim = head_dim;
  plain.key_dim = key_dim;
  configs.push_back({"identity_no_gate", plain});
  return configs;
}

// Every parameter of `layer` redrawn around its initial value (norm gains away from 1, biases
// away from 0), keeping the extreme gate biases of the saturation configs extreme.
inline void perturb_parameters(nn::Module& layer, Generator& gen) {
  NoGradGuard no_grad;
  for (auto& p : layer.named_parameters()) {
    Tensor t = p.tensor;
    add_(t, randn(t.shape(), t.dtype(), &gen), 0.3);
  }
}

}  // namespace linea::testing
