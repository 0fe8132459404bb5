#pragma once
// A decoding step's products with their neighbours folded in.
//
// Decoding one token is a chain of small kernels: at batch 1 a block's step (norm, product, mixer,
// product, residual add, norm, product, activation, product, residual add) is a dozen launches,
// each too short to reach the memory's bandwidth, so the step is bound by how many there are
// (docs/benchmarks.md). fused_product runs a Linear together with what surrounds it in a block:
// the norm of its input before, an activation (and a gated unit's second Linear) after, and the
// residual addition last, as one fused_linear (autograd/ops.h) — one launch that reads the weights
// once. A block's step then takes five launches and its mixer's own.
//
// The fusion is for inference. Under grad mode, under bfloat16 products (nn/precision.h) or with
// a LoRA adapter, the modules run one by one as they would without it, so that training and
// differentiable decoding are unchanged.
#include <optional>

#include "nn/layers/linear.h"
#include "nn/layers/mlp.h"
#include "nn/layers/norm.h"

namespace linea::nn {

struct ProductFusion {
  const Norm* input_norm = nullptr;       // the product reads input_norm(x)
  std::optional<Activation> activation{};  // applied to the product (plus its bias)
  const Linear* up = nullptr;             // a gated unit: the activated product times up(input)
  Tensor residual{};                      // added last (undefined: nothing)
};

// Whether products on x's dtype run fused now: no grad is recorded and the products are not
// rounded to bfloat16.
bool fuses_products(const Tensor& x);

// residual + act(linear(norm(x))) [* up(norm(x))], x (..., in) -> (..., out).
Tensor fused_product(const Linear& linear, const Tensor& x, const ProductFusion& fusion);
// The same for a weight (out, in) and bias (out, or undefined) that are not a Linear's (a head
// tied to the embedding); fusion.up must be null.
Tensor fused_product(const Tensor& weight, const Tensor& bias, const Tensor& x, const ProductFusion& fusion);

// residual + linear(x) over a prompt's rows, x (..., in) and residual (..., out), for a caller that
// gives residual up: its own running sum, which nothing else reads (LanguageModel::prefill's).
// Where products run fused (no LoRA) and residual is contiguous, the product is added into
// residual's memory by the GEMM itself (matmul_add_), one launch instead of a product and an
// addition, and residual is returned; otherwise residual + linear.forward(x), out of place.
Tensor add_product_into(const Tensor& residual, const Linear& linear, const Tensor& x);

// The unary op fused_linear applies for an activation.
UnaryOp unary_op_of(Activation activation);

}  // namespace linea::nn
