#pragma once
// Softmax attention (notes/attention.md section 1): the baseline, and half of a hybrid.
//
//   o_t = sum_{s in window(t)} softmax_s(q_t . k_s / sqrt(dh)) v_s,   window(t) = (t - W, t]
//
// per head, with optional RoPE on q and k, fewer K/V heads than query heads (multi-query:
// kv_heads = 1; grouped-query: heads / kv_heads query heads share one K/V head), and an optional
// sliding window W (Griffin's local attention; 0 = the full causal prefix).
//
// Shapes: x (B, T, D); q (B, H, T, dh); k, v (B, KV, T, dh). Grouped queries are computed without
// copying K/V: q is viewed as (B, KV, G*T, dh) with G = H / KV, so each K/V head meets its G
// query heads in one batched matmul. The T x T score matrix is formed (this is the one layer
// where that is expected); the CUDA backend replaces it with a fused FlashAttention-style kernel.
//
// Decoding keeps a KV cache (the keys and values of the positions seen, at most W of them with a
// window) and attends from the new token to it: its output equals the full forward's.
#include <memory>

#include "nn/layers/linear.h"
#include "nn/layers/rope.h"
#include "nn/mixer.h"

namespace linea::nn {

struct SoftmaxAttentionConfig {
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t kv_heads = 0;  // 0: as many as heads; must divide heads
  int64_t head_dim = 0;  // 0: d_model / heads
  bool rope = true;
  double rope_base = 10000.0;
  int64_t rotary_dim = 0;  // 0: rotate whole heads
  int64_t window = 0;      // 0: full causal attention; W > 0: the last W positions only
  bool bias = false;       // biases on the projections
};

class SoftmaxAttention : public SequenceMixer {
 public:
  SoftmaxAttention(const SoftmaxAttentionConfig& config, Generator& gen);

  Tensor forward(const Tensor& x) override;
  std::unique_ptr<DecodeState> init_state(int64_t batch) const override;
  Tensor step(const Tensor& x, DecodeState& state) override;

  const SoftmaxAttentionConfig& config() const { return config_; }

  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;

 private:
  // (B, T, D) -> (B, heads, T, dh) through proj, with RoPE from position offset when enabled.
  Tensor project_heads(const Linear& proj, const Tensor& x, int64_t heads, int64_t offset, bool rotate) const;
  // q (B, H, Tq, dh), k/v (B, KV, Tk, dh), allowed (Tq, Tk) Bool or undefined -> (B, Tq, H*dh).
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& allowed) const;

  SoftmaxAttentionConfig config_;
  std::shared_ptr<RoPE> rope_;
};

}  // namespace linea::nn
