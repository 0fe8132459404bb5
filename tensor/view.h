#pragma once
// Views: new (shape, strides, offset) over the same storage, no data copied. These are the raw
// computations; autograd/ops/views.cpp wraps each with its backward.
//
//   x = 2x3 contiguous: strides (3, 1)
//   transpose(x)  -> shape (3, 2), strides (1, 3): same memory, read column-wise
//   slice(x, 1, 0, 3, 2) -> shape (2, 2), strides (3, 2): every second column
//   expand(row (1, 3) to (4, 3)) -> strides (0, 1): one row read four times
#include <optional>
#include <vector>

#include "tensor/tensor.h"

namespace linea::views {

// Strides for viewing x with `shape` without copying, if x's strides allow it; empty otherwise.
// Follows PyTorch's rule: each group of old dims that merges or splits must be contiguous.
std::optional<Shape> strides_for_view(const Tensor& x, const Shape& shape);
// Replaces a single -1 in shape with what makes numel match; errors name op.
Shape infer_size(const Shape& shape, int64_t numel, const char* op);

Tensor view(const Tensor& x, const Shape& shape);  // Error if strides do not allow it
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor squeeze(const Tensor& x, const std::vector<int64_t>& dims);  // listed size-1 dims
Tensor unsqueeze(const Tensor& x, int64_t dim);

}  // namespace linea::views
