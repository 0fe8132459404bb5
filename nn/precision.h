#pragma once
// Mixed precision (`linea train --precision bf16`). While a PrecisionScope of bfloat16 lives on
// this thread:
//   - x W^T runs as a bfloat16 x bfloat16 product with float32 accumulation (the bfloat16 tensor
//     cores on CUDA; the CPU computes the same in float32 and rounds, as a reference), its result
//     in x's dtype: float32 for float32 x, bfloat16 for bfloat16 x;
//   - the weights stay float32 master copies: the optimizer and its state see only float32, and
//     the backward's products (dy W and dy^T x, dy rounded to bfloat16) give each gradient in its
//     operand's dtype, the weights' in float32;
//   - in the training forward (Block::forward, LanguageModel::forward) the residual stream stays
//     float32 and the branches that have bfloat16 kernels run on bfloat16 activations
//     (activation_dtype): the norm before them writes bfloat16, the products, softmax attention,
//     the MLP's activation and the LM head's logits stay bfloat16, and the branch's last product
//     writes float32 (stream_dtype), never rounded, into the stream's addition; the
//     cross-entropy, the norms' statistics, the linear-attention mixers and the gradient norm
//     compute in float32 (the bfloat16 gated scan, autograd/ops.h, reads and writes bfloat16 in
//     place on CUDA, but the mixer's activations come from float32 kernels: casting q, k, v and
//     o to and from bfloat16 cost more than the scan saves, docs/benchmarks.md);
//   - decoding and prompt processing keep float32 activations, with the products in bfloat16.
// bfloat16 keeps float32's exponent range, so no gradient underflows where float32's would not:
// unlike float16 it needs no loss scaling (docs/math.md says more).
// float64 models ignore the setting: they are there to check gradients to the last digit.
#include <string>

#include "tensor/scoped_setting.h"
#include "tensor/tensor.h"

namespace linea::nn {

enum class Precision { Float32, BFloat16 };

std::string precision_name(Precision precision);  // "fp32", "bf16"
Precision parse_precision(const std::string& name, const char* op);

// This thread's precision for the products (Float32 unless a scope says otherwise).
Precision product_precision();
void set_product_precision(Precision precision);

// Sets this thread's precision until the scope ends, then gives the previous one back.
using PrecisionScope = ScopedSetting<Precision, product_precision, set_product_precision>;

// x W^T for x (..., in) and a weight W (out, in), in this thread's precision. W is rounded as
// stored and read through a transposed view, so the product reads it in place, as in float32.
Tensor linear_product(const Tensor& x, const Tensor& weight);
// The same with the result in `out` (x's dtype, or float32 for bfloat16 x under bfloat16
// precision: a bfloat16 x bfloat16 product written in float32, never rounded to bfloat16).
Tensor linear_product(const Tensor& x, const Tensor& weight, DType out);

// The dtype a branch's activations take for float32 input x: bfloat16 under bfloat16 precision,
// x's own dtype otherwise.
DType activation_dtype(const Tensor& x);
// The dtype a branch's last product writes for branch activations x: the residual stream's,
// float32 for bfloat16 x under bfloat16 precision (activation_dtype's inverse), x's otherwise.
DType stream_dtype(const Tensor& x);

}  // namespace linea::nn
