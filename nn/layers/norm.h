#pragma once
// Normalization layers over the last dim, on the fused kernels of autograd/ops/norm.cpp.
// Their weights and biases take no weight decay (decaying a gain toward zero would shrink the
// layer's output, not regularize it).
//
//   LayerNorm  y = (x - mean(x)) / sqrt(var(x) + eps) * w + b      x (..., D); w, b (D)
//   RMSNorm    y = x / sqrt(mean(x^2) + eps) * w                    x (..., D); w (D)
//   HeadNorm   either one applied to each head separately           x (..., H, dh)
//
// RMSNorm's gain starts at 1 and multiplies directly (Griffin writes it as (1 + w) with w = 0:
// the same function, another parametrization).
#include "nn/module.h"

namespace linea::nn {

// What a block needs of its norms, whichever kind (nn/model.cpp: make_norm).
enum class NormKind { RMS, Layer };
// A norm as the input norm of a fused product (autograd/ops.h: fused_linear).
struct InputNorm {
  RowNorm kind;
  Tensor weight, bias;  // undefined where the norm has none
  double eps;
};
// LayerNorm and RMSNorm differ only in their kind and in which parameters they have, so the
// forward is written here once: the fused row-norm kernels (autograd/ops/norm.cpp) by kind.
class Norm : public Module {
 public:
  // (..., dim) -> (..., dim), in x's dtype, or in `out`: bfloat16 from float32 x is the norm
  // before bfloat16 products (nn/precision.h: activation_dtype), written in the same pass.
  Tensor forward(const Tensor& x) const { return forward(x, x.dtype()); }
  Tensor forward(const Tensor& x, DType out) const;
  InputNorm as_input_norm() const { return {kind_, weight, bias, eps_}; }

  int64_t dim() const { return dim_; }
  double eps() const { return eps_; }

  Tensor weight;  // (dim), ones; undefined without a gain
  Tensor bias;    // (dim), zeros; LayerNorm's only, undefined without one

 protected:
  // dim > 0 and eps >= 0, else an Error naming the layer; registers the parameters asked for.
  Norm(RowNorm kind, int64_t dim, double eps, bool with_weight, bool with_bias, const char* layer);

 private:
  RowNorm kind_;
  int64_t dim_;
  double eps_;
  const char* layer_;
};

class LayerNorm : public Norm {
 public:
  // affine: a gain and a bias.
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool affine = true)
      : Norm(RowNorm::Layer, dim, eps, affine, affine, "LayerNorm") {}
};

class RMSNorm : public Norm {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-6, bool with_weight = true)
      : Norm(RowNorm::RMS, dim, eps, with_weight, false, "RMSNorm") {}
};

// The per-head ("group") norm on attention outputs before heads are merged: the "stable
// normalization" of linear attention (docs/math.md#output-norm). Each head's dh
// values are normalized on their own, so one head's scale cannot swamp another's.
//
// Input (..., H, dh): heads in the second-to-last dim, so the training layout (B, T, H, dh) and
// the decoding layout (B, H, dh) use one module; a (B, H, T, dh) tensor is transposed first.
enum class HeadNormWeight {
  Shared,      // w (and b) of size dh, shared by the heads: GLA's and ReGLA's output norm
  PerChannel,  // w (and b) of size H*dh, one per channel: RetNet's GroupNorm(H, H*dh)
  None,
};

struct HeadNormOptions {
  NormKind kind = NormKind::RMS;
  HeadNormWeight weight = HeadNormWeight::Shared;
  double eps = 1e-6;
};

class HeadNorm : public Module {
 public:
  HeadNorm(int64_t num_heads, int64_t head_dim, HeadNormOptions options = {});
  Tensor forward(const Tensor& x) const;  // (..., H, dh) -> (..., H, dh)

  int64_t num_heads() const { return num_heads_; }
  int64_t head_dim() const { return head_dim_; }

  Tensor weight;  // ones, (dh) or (H*dh); undefined with HeadNormWeight::None
  Tensor bias;    // zeros, like weight; only for NormKind::Layer

 private:
  int64_t num_heads_, head_dim_;
  HeadNormOptions options_;
};

}  // namespace linea::nn
