#pragma once
// Input checks shared by the layers, so every shape error names the layer and what it expects.
#include "tensor/tensor.h"

namespace linea::nn {

// x is a defined floating tensor (..., expected), else "linea.Linear: expects a floating input
// (..., 64), got float32[2, 5, 48] on cpu".
void check_last_dim(const Tensor& x, int64_t expected, const char* layer);

// A layer's size argument is positive: "Linear: in_features must be positive, got 0".
void check_positive(int64_t value, const char* what, const char* layer);

// A layer's head_dim: as given, or d_model / heads when 0, where heads must then divide d_model:
// "DeltaNet: d_model 10 is not divisible by 4 heads (or set head_dim)".
int64_t resolved_head_dim(int64_t head_dim, int64_t d_model, int64_t heads, const char* layer);

}  // namespace linea::nn
