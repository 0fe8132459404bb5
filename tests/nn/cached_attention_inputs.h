#pragma once
// The inputs of cached_attention_step (and cached_attention_projected) drawn for a test case,
// shared by its CPU test (tests/nn/cached_attention_test.cpp) and its CUDA parity test
// (tests/cuda/cached_attention_test.cpp).
#include <vector>

#include "tests/test_util.h"

namespace linea::testing {

struct CachedAttentionCase {
  int64_t batch, heads, kv_heads, dh, half, columns, table;  // half 0: no rotation
  std::vector<int64_t> positions;
};

struct CachedAttentionInputs {
  Tensor q, k, v, cos, sin, cache_k, cache_v, positions;
};

// Random normal q, k, v and caches, and RoPE tables of random angles (the kernel reads tables,
// it does not make them), in dtype on the CPU.
inline CachedAttentionInputs draw_cached_attention(const CachedAttentionCase& c, DType dtype, Generator& gen) {
  CachedAttentionInputs in;
  in.q = randn({c.batch, c.heads, c.dh}, dtype, &gen);
  in.k = randn({c.batch, c.kv_heads, c.dh}, dtype, &gen);
  in.v = randn({c.batch, c.kv_heads, c.dh}, dtype, &gen);
  in.cache_k = randn({c.batch, c.kv_heads, c.columns, c.dh}, dtype, &gen);
  in.cache_v = randn({c.batch, c.kv_heads, c.columns, c.dh}, dtype, &gen);
  if (c.half > 0) {
    const Tensor angles = rand({c.table, c.half}, dtype, &gen) * 6.0;
    in.cos = cos(angles);
    in.sin = sin(angles);
  }
  in.positions = from_vector<int64_t>(c.positions, {c.batch});
  return in;
}

inline Tensor run_cached_attention(CachedAttentionInputs& in) {
  return cached_attention_step(in.q, in.k, in.v, in.positions, in.cos, in.sin, in.cache_k, in.cache_v);
}

// An output projection for `batch` rows of `width` (H dh): weight (outputs, width), and optionally
// bias (outputs) and residual (batch, outputs), random normal in dtype on the CPU.
inline AttentionProjection draw_projection(int64_t batch, int64_t width, int64_t outputs, bool bias, bool residual,
                                           DType dtype, Generator& gen) {
  AttentionProjection p;
  p.weight = randn({outputs, width}, dtype, &gen);
  if (bias) p.bias = randn({outputs}, dtype, &gen);
  if (residual) p.residual = randn({batch, outputs}, dtype, &gen);
  return p;
}

inline Tensor run_projected(CachedAttentionInputs& in, const AttentionProjection& projection) {
  return cached_attention_projected(in.q, in.k, in.v, in.positions, in.cos, in.sin, in.cache_k, in.cache_v,
                                    projection);
}

}  // namespace linea::testing
