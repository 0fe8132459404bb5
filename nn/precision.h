#pragma once
// Mixed precision for the products of the Linear layers and the LM head (`linea train --precision
// bf16`). While a PrecisionScope of bfloat16 lives on this thread, x W^T runs as a bfloat16 x
// bfloat16 product with float32 accumulation (the bfloat16 tensor cores on CUDA; the CPU computes
// the same in float32 and rounds, as a reference) and the result is widened back to float32:
//   - the weights stay float32 master copies: the optimizer and its state see only float32;
//   - the backward's products (dy W and dy^T x, dy rounded to bfloat16) run the same way, and
//     the gradients arrive in float32;
//   - everything between the products (norms, softmax and linear attention, the scans, the
//     cross-entropy, the gradient norm) computes in float32.
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

}  // namespace linea::nn
