#pragma once
// Shapes and strides. Strides count elements, not bytes, as in PyTorch; a view is (shape,
// strides, offset) over shared storage, so every shape helper lives here.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace linea {

using Shape = std::vector<int64_t>;
inline constexpr int kMaxDims = 8;

int64_t numel_of(const Shape& shape);
Shape contiguous_strides(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[2, 3]"

// Validates a shape given by the user: at most kMaxDims dims, no negative sizes.
void check_shape(const Shape& shape, const char* op);

// Maps a possibly negative dim into [0, ndim); error naming the op otherwise.
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op);

// NumPy broadcasting: align trailing dims, sizes must match or be 1.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Sorted, unique, normalized dims; an empty list means "all dims".
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op);

// The shape of a reduction over `dims` (normalized), keeping them as size 1 or dropping them.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);

// A contiguous tensor viewed as (outer, size along dim, inner): how many kernels, CPU and CUDA,
// walk a tensor along one dim.
struct DimSplit {
  int64_t outer = 1, size = 1, inner = 1;
};
DimSplit split_at(const Shape& shape, int64_t dim);

// A tensor viewed as rows of its last dim (a 0-dim tensor is one row of one element): how the
// norm kernels, CPU and CUDA, walk it.
struct RowsCols {
  int64_t rows, cols;
};
RowsCols rows_cols(const Shape& shape);

}  // namespace linea
