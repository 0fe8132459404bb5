#pragma once
// The language model's configuration, and its JSON form (written next to every checkpoint):
//
//   {"vocab_size": 256, "d_model": 128, "heads": 4, "pattern": "RRRR", "norm": "rms",
//    "mlp": "swiglu", "tie_embeddings": true,
//    "layers": {"R": {"feature_map": "relu"}, "S": {"window": 64, "kv_heads": 1}}}
//
// A model with LoRA adapters (nn/layers/lora.h; the fine-tuning stage of `linea linearize`) has
// one more member, "lora": {"rank": 8, "alpha": 16, "targets": "q,k,v,o"}; a model without has none.
//
// "layers" holds per-letter options that override the defaults of that letter's layer (the keys
// each letter accepts are listed by `linea train --help-layers` and docs/layers.md); an unknown
// key is an error, never silently ignored.
#include <cstdint>
#include <string>

#include "nn/json.h"
#include "nn/layers/lora.h"
#include "nn/layers/norm.h"

namespace linea::nn {

// The blocks' feed-forward part: a plain MLP with GELU (exact or tanh-approximated), or a gated
// one with GELU (GeGLU) or SiLU (SwiGLU). Configs and the command line name them as in the table
// of config.cpp: "gelu", "gelu_tanh", "geglu", "swiglu".
enum class MlpKind { Gelu, GeluTanh, GeGLU, SwiGLU };

// Names both ways; an unknown name is an Error from `op` listing the known ones.
std::string norm_kind_name(NormKind kind);   // "rms", "layer"
NormKind norm_kind_named(const std::string& name, const char* op);
std::string mlp_kind_name(MlpKind kind);
MlpKind mlp_kind_named(const std::string& name, const char* op);

struct ModelConfig {
  int64_t vocab_size = 256;
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t head_dim = 0;        // 0: d_model / heads
  std::string pattern = "RRRR";  // one letter per layer (nn/model.h, layer_kinds())
  NormKind norm = NormKind::RMS;  // the blocks' pre-norms and the final norm
  double norm_eps = 1e-6;
  MlpKind mlp = MlpKind::SwiGLU;
  int64_t mlp_hidden = 0;      // 0: 4 D for the plain MLP; for the gated kinds 8/3 D rounded up to a
                               // multiple of 8, which keeps the parameter count of the 4 D MLP
  bool tie_embeddings = true;
  double dropout = 0.0;        // residual dropout after each mixer and MLP
  uint64_t seed = 0;           // seeds the dropout masks' generator
  json::Value layers = json::Value::object();  // per-letter overrides
  LoraConfig lora;             // rank 0 (the default): no adapters

  int64_t layer_count() const { return static_cast<int64_t>(pattern.size()); }
  int64_t resolved_head_dim() const { return head_dim ? head_dim : d_model / heads; }
  int64_t resolved_mlp_hidden() const;
  // The overrides object for one letter (an empty object when none).
  json::Value options_for(char letter) const;

  // Errors name the field and the offending value.
  void validate() const;
  json::Value to_json() const;
  static ModelConfig from_json(const json::Value& value);  // unknown keys are errors
};

}  // namespace linea::nn
