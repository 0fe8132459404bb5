#include "tensor/shape.h"

#include <algorithm>

#include "tensor/error.h"

namespace linea {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = step;
    step *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void check_shape(const Shape& shape, const char* op) {
  LINEA_CHECK(shape.size() <= kMaxDims, op, "at most ", kMaxDims, " dims are supported, got shape ",
              shape_str(shape));
  for (int64_t s : shape)
    LINEA_CHECK(s >= 0, op, "sizes must be non-negative, got shape ", shape_str(shape));
  // numel_of multiplies the sizes: the product must fit an int64 (a zero size makes it 0 anyway).
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return;
  int64_t n = 1;
  for (int64_t s : shape)
    LINEA_CHECK(!__builtin_mul_overflow(n, s, &n), op, "shape ", shape_str(shape),
                " has more elements than an int64 can count");
}

int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op) {
  // A 0-dim tensor accepts dim 0 and -1, as in PyTorch.
  const int64_t n = std::max<int64_t>(ndim, 1);
  LINEA_CHECK(dim >= -n && dim < n, op, "dim ", dim, " is out of range for a tensor with ", ndim,
              " dims");
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t sa = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t sb = i < n - b.size() ? 1 : b[i - (n - b.size())];
    LINEA_CHECK(sa == sb || sa == 1 || sb == 1, op, "shapes ", shape_str(a), " and ", shape_str(b),
                " cannot be broadcast together");
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim, const char* op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(normalize_dim(d, ndim, op));
  std::sort(out.begin(), out.end());
  LINEA_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), op,
              "a dim appears twice in the list of dims");
  if (ndim == 0) out.clear();
  return out;
}

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

DimSplit split_at(const Shape& shape, int64_t dim) {
  DimSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) s.outer *= shape[d];
    else if (d == dim) s.size = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

RowsCols rows_cols(const Shape& shape) {
  const int64_t cols = shape.empty() ? 1 : shape.back();
  return {cols ? numel_of(shape) / cols : 0, cols};
}

}  // namespace linea
