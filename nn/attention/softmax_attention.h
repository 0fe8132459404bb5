#pragma once
// Softmax attention (docs/math.md#softmax-attention): the baseline, and half of a hybrid.
//
//   o_t = sum_{s in window(t)} softmax_s(q_t . k_s / sqrt(dh)) v_s,   window(t) = (t - W, t]
//
// per head, with optional RoPE on q and k, fewer K/V heads than query heads (multi-query:
// kv_heads = 1; grouped-query: heads / kv_heads query heads share one K/V head), and an optional
// sliding window W (Griffin's local attention; 0 = the full causal prefix).
//
// Shapes: x (B, T, D); q (B, H, T, dh); k, v (B, KV, T, dh). Two paths compute the same thing:
//   fused      scaled_dot_product_attention (autograd/ops.h): one kernel each way, no T x T
//              matrix in memory (FlashAttention-style on CUDA). Always taken on CUDA.
//   composite  matmul -> masked_fill -> softmax -> matmul, with grouped queries computed without
//              copying K/V: q is viewed as (B, KV, G*T, dh) with G = H / KV, so each K/V head meets
//              its G query heads in one batched matmul. The default on the CPU, where its BLAS
//              matmuls beat the fused kernel's scalar loops (measured: see `fused` below).
//
// Decoding keeps a KV cache (the keys and values of the positions seen, at most W of them with a
// window, position p in column p mod C) and attends from the new token to it: its output equals
// the full forward's. Without grad a step is one fused op, cached_attention_step (with the output
// projection after it, cached_attention_projected, where the products run fused), that writes the
// new key and value into the cache in place and advances each row's position on the device; so
// once reserve() has sized the cache for the tokens to come, the step keeps its shapes and a CUDA
// graph replays it. prefill projects a whole prompt at once, attends from all its queries in one
// call, and lays the keys out in the cache. Sequences of different lengths stack into one batch
// (stack_states): each row's keys at its own columns, each row at its own position.
#include <memory>

#include "nn/layers/linear.h"
#include "nn/layers/rope.h"
#include "nn/layers/stacked_projection.h"
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
  // On the CPU, use the fused kernel instead of the composite path (CUDA always uses it). Off by
  // default, by measurement: the whole layer (d_model 128, 4 heads of 32, B=1, float32, forward
  // + backward, best of 9 on 2 busy cores) took 43 ms composite vs 63 ms fused at T=256 and
  // 626 vs 999 ms at T=1024, since the composite's matmuls run on BLAS while the fused CPU
  // kernel is the plain per-row oracle. The fused path saves the T x T scores' memory, which
  // matters only for long sequences.
  bool fused = false;
};

class SoftmaxAttention : public OutputProjectedMixer {
 public:
  SoftmaxAttention(const SoftmaxAttentionConfig& config, Generator& gen);

  Tensor forward(const Tensor& x) override;
  bool takes_bfloat16() const override { return true; }  // products, RoPE and attention all do
  std::unique_ptr<DecodeState> init_state(int64_t batch) const override;
  Tensor step(const Tensor& x, DecodeState& state) override;
  // The block's norm folded into the q, k, v product and the residual into o_proj's (no grad).
  Tensor residual_step(const Tensor& x, const Norm& norm, DecodeState& state) override;
  std::unique_ptr<DecodeState> stack_states(const std::vector<const DecodeState*>& rows) const override;
  void reserve(DecodeState& state, int64_t tokens) const override;

  const SoftmaxAttentionConfig& config() const { return config_; }

  std::shared_ptr<Linear> q_proj, k_proj, v_proj, o_proj;

 protected:
  // Every key and value of the prompt goes into the cache; only the last query attends with
  // last_only (prefill_queries).
  Tensor prefill_mixed(const Tensor& x, DecodeState& state, bool last_only) override;
  const Linear& output_projection() const override { return *o_proj; }

 private:
  // (B, T, D) -> (B, heads, T, dh) through proj, with RoPE from position offset when enabled.
  Tensor project_heads(const Linear& proj, const Tensor& x, int64_t heads, int64_t offset, bool rotate) const;
  // The same for a projection already made, y (B, T, heads dh).
  Tensor heads_of(const Tensor& y, int64_t heads, int64_t offset, bool rotate) const;
  // A prefill's q projection of x's last `queries` tokens, (B, queries, H dh), and k projection
  // of all of them, (B, T, KV dh); with RoPE as one product.
  struct QKRows {
    Tensor q, k;
  };
  QKRows project_qk(const Tensor& x, int64_t queries);
  // q (B, H, Tq, dh), k/v (B, KV, Tk, dh), the queries being the last Tq of the Tk positions
  // -> (B, Tq, H*dh), through the fused kernel or the composite path (see the top of this file).
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v) const;
  // The composite path; allowed Bool, broadcast over (B, KV, G, Tq, Tk): (Tq, Tk), or per row
  // (B, 1, 1, Tq, Tk); undefined when every key is visible.
  Tensor attend_composite(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& allowed) const;
  // The decoding step in differentiable ops (grad mode): q (B, H, dh), k, v (B, KV, dh) of the new
  // token, `state` a KVCache with room for it -> (B, 1, H dh). Without grad, cached_attention_step.
  Tensor step_differentiable(const Tensor& q, const Tensor& k, const Tensor& v, DecodeState& state);
  // step() on input_norm(x) (x itself without a norm), plus `residual` (undefined: none).
  Tensor decode(const Tensor& x, DecodeState& state, const Norm* input_norm, const Tensor& residual);
  // prefill() up to o_proj's input, (B, queries, H dh), for the last `queries` tokens only (T or
  // 1): every key and value goes into the cache, only those queries attend.
  Tensor prefill_queries(const Tensor& x, DecodeState& state, int64_t queries);

  SoftmaxAttentionConfig config_;
  std::shared_ptr<RoPE> rope_;
  StackedProjection step_projections_;  // the decoding step's q, k and v as one product
  StackedProjection qk_projections_;    // a prefill's q and k as one product (with RoPE)
};

}  // namespace linea::nn
