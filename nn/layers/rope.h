#pragma once
// RoPE, rotary position embedding (Su et al. 2021), in the rotate-half convention of GPT-NeoX /
// Pythia / Llama. For a head vector x at position p, with r = rotary_dim and i < r/2:
//
//   theta_i = base^(-2i / r)
//   y_i       = x_i cos(p theta_i) - x_{i+r/2} sin(p theta_i)
//   y_{i+r/2} = x_{i+r/2} cos(p theta_i) + x_i sin(p theta_i)
//   y_j       = x_j  for j >= r (partial rotary: Pythia rotates a quarter of each head)
//
// i.e. y = x * cos + rotate_half(x) * sin with rotate_half([a, b]) = [-b, a]. Rotating q at m and
// k at n by their positions makes q_m . k_n depend on m - n only. Computed by the fused op
// rotary_embedding (autograd/ops/rotary.cpp): one pass forward and one backward.
//
// Layout (..., T, dh): time in the second-to-last dim, so (B, H, T, dh), the layout attention
// computes in, works directly; row t gets position offset + t. Decoding one token at position p
// is forward(x (B, H, 1, dh), p) or step(x (B, H, dh), p); both equal the rows of the full
// forward. A (B, T, H, dh) tensor is transposed first. In a batch whose sequences have seen
// different numbers of tokens (generation from prompts of several lengths), step_rows rotates
// each batch row at its own position.
//
// cos/sin (of p theta_i, i < r/2) come from float64 tables of positions [0, capacity), computed
// once and doubled when a longer position is asked for, then converted once to the input's dtype
// (float32 for bfloat16 input, which rotates in float32) and device. They are not buffers: they
// are a function of the options, not state, and stay out of state dicts.
// The cache makes forward not thread-safe.
#include <utility>
#include <vector>

#include "nn/module.h"

namespace linea::nn {

struct RoPEOptions {
  double base = 10000.0;
  int64_t rotary_dim = 0;  // r: the leading dims of each head that rotate; 0 means all of them
  int64_t max_len = 2048;  // initial table length (it grows on demand)
};

class RoPE : public Module {
 public:
  explicit RoPE(int64_t head_dim, RoPEOptions options = {});

  Tensor forward(const Tensor& x, int64_t offset = 0) const;  // x (..., T, dh) -> (..., T, dh)
  Tensor step(const Tensor& x, int64_t position) const;       // x (..., dh) at one position
  // x (B, ..., dh): batch row b at positions[b] (B of them).
  Tensor step_rows(const Tensor& x, const std::vector<int64_t>& positions) const;

  // The cos and sin tables (capacity, r/2) in dtype on device, covering positions [0, length) at
  // least: what a fused kernel that rotates by itself reads (the KV cache's step). The tensors
  // are replaced, not changed, when a longer length is asked for later, so a holder of these
  // keeps valid tables.
  std::pair<Tensor, Tensor> tables(int64_t length, DType dtype, Device device) const;

  int64_t head_dim() const { return head_dim_; }
  int64_t rotary_dim() const { return rotary_dim_; }
  int64_t table_length() const { return cos_.defined() ? cos_.size(0) : 0; }

 private:
  void ensure_tables(int64_t length, DType dtype, Device device) const;

  int64_t head_dim_, rotary_dim_;
  double base_;
  // Float64 host tables (capacity, r/2), and their copies in the dtype and device last used.
  mutable Tensor cos_, sin_, cos_cast_, sin_cast_;
};

}  // namespace linea::nn
