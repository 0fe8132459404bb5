#pragma once
// LoRA (Hu et al. 2021): a trainable low-rank update of a frozen Linear's weight.
//
//   y = x W^T + b + (alpha / r) (x A^T) B^T        A (r, in), B (out, r), r << min(in, out)
//
// A starts small and random, B at zero, so an adapted model starts equal to its base model; only
// A and B are trained (r (in + out) numbers instead of in out). Merging folds the update into the
// weight, W <- W + (alpha / r) B A, which gives a plain Linear with the same outputs: a merged
// checkpoint loads as an ordinary model. Used by the fine-tuning stage of `linea linearize`
// (train/linearize.h; the method: ../docs/linearize.md).
//
// Where adapters go is named by targets, a comma-separated list:
//   q, k, v, o   the mixer's query, key, value and output projections (q_proj, k_proj, v_proj, and
//                o_proj in softmax attention, out_proj in the linear family)
//   mlp          every Linear of the block's feed-forward part
// Parameter names: <linear>.lora.A and <linear>.lora.B, e.g. blocks.0.mixer.q_proj.lora.A.
#include <string>
#include <vector>

#include "nn/json.h"
#include "nn/module.h"

namespace linea::nn {

struct LoraConfig {
  int64_t rank = 0;                  // 0: no adapters
  double alpha = 16.0;               // the update is scaled by alpha / rank
  std::string targets = "q,k,v,o";   // see above

  bool enabled() const { return rank > 0; }
  double scale() const { return alpha / static_cast<double>(rank); }
  std::vector<std::string> target_list() const;  // checked: known names, none twice
  // Errors name the field ("lora rank", "lora targets") and the bad value.
  void validate() const;
  json::Value to_json() const;
  static LoraConfig from_json(const json::Value& value);
};

// The low-rank update itself, a child named "lora" of the Linear it adapts.
class LoraAdapter : public Module {
 public:
  // A ~ U(-1/sqrt(in), 1/sqrt(in)) (the Linear default, as PyTorch's peft), B = 0.
  LoraAdapter(int64_t in_features, int64_t out_features, int64_t rank, double alpha, Generator& gen);

  Tensor forward(const Tensor& x) const;  // x (..., in) -> (alpha / r) (x A^T) B^T, (..., out)
  Tensor delta() const;                   // (alpha / r) B A, (out, in): what merging adds to W

  int64_t rank() const { return A.size(0); }
  double scale() const { return scale_; }

  Tensor A;  // (r, in)
  Tensor B;  // (out, r)

 private:
  double scale_;
};

// True for the name of a LoRA parameter ("... .lora.A", "... .lora.B").
bool is_lora_parameter(const std::string& name);

// A state dict with every adapter merged into its weight and the adapters' entries removed: the
// weights of the same model without LoRA. Errors name an adapter whose weight is missing.
StateDict merge_lora(const StateDict& state, const LoraConfig& config);

}  // namespace linea::nn
