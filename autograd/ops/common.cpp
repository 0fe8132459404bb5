#include "autograd/ops/common.h"

#include <algorithm>

#include "tensor/view.h"

namespace linea::ops_detail {

void check_defined(const Tensor& x, const char* op) {
  LINEA_CHECK(x.defined(), op, "got an undefined tensor");
}

void check_floating(const Tensor& x, const char* op) {
  check_defined(x, op);
  LINEA_CHECK(is_floating(x.dtype()), op, "expected a float32 or float64 tensor, got ", x.describe());
}

void check_compatible(const Tensor& a, const Tensor& b, const char* op, bool allow_any) {
  check_defined(a, op);
  check_defined(b, op);
  LINEA_CHECK(a.device() == b.device(), op, "tensors are on different devices: ", a.describe(), " and ",
              b.describe());
  LINEA_CHECK(a.dtype() == b.dtype(), op, "tensors have different dtypes: ", a.describe(), " and ",
              b.describe(), " (convert one with to(x, dtype))");
  if (!allow_any) check_floating(a, op);
}

void check_index_tensor(const Tensor& index, const Tensor& x, const char* op) {
  check_defined(index, op);
  LINEA_CHECK(index.dtype() == kInt64, op, "indices must be int64, got ", index.describe());
  LINEA_CHECK(index.device() == x.device(), op, "indices ", index.describe(), " and tensor ", x.describe(),
              " are on different devices");
}

int64_t dim_along(const Tensor& x, int64_t dim, const char* op) {
  check_defined(x, op);
  LINEA_CHECK(x.dim() > 0, op, "a 0-dim tensor has no dim ", dim, " to work along: ", x.describe());
  return normalize_dim(dim, x.dim(), op);
}

Tensor unary_kernel(UnaryOp op, const Tensor& x, UnaryArgs args) {
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  backend_for(x).unary(op, x, out, args);
  return out;
}

Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  const bool logical = op == BinaryOp::And || op == BinaryOp::Or;
  check_compatible(a, b, name, is_comparison(op) || logical);
  if (logical) LINEA_CHECK(a.dtype() == kBool, name, "expects bool tensors, got ", a.describe());
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty(shape, is_comparison(op) || logical ? kBool : a.dtype(), a.device());
  backend_for(a).binary(op, broadcast_view(a, shape, name), broadcast_view(b, shape, name), out);
  return out;
}

Tensor scalar_like(double value, const Tensor& x) { return full({}, value, {x.dtype(), x.device()}); }

Tensor in_order_of(const Tensor& flat, const Shape& shape, const Shape& strides) {
  const bool rows_contiguous = shape.empty() || shape.back() == 1 || strides.back() == 1;
  if (!rows_contiguous) return reshape(flat, shape);
  // The leading dims by decreasing stride (gaps between rows do not matter: a view of one part of
  // a wider product has them), the last dim innermost.
  std::vector<int64_t> order(shape.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int64_t>(d);
  if (!order.empty())
    std::stable_sort(order.begin(), order.end() - 1, [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  Shape permuted(shape.size());
  std::vector<int64_t> inverse(shape.size());
  for (size_t i = 0; i < order.size(); ++i) {
    permuted[i] = shape[order[i]];
    inverse[order[i]] = static_cast<int64_t>(i);
  }
  return permute(reshape(flat, permuted), inverse);
}

Tensor empty_in_order_of(const Shape& shape, const Shape& strides, DType dtype, Device device) {
  return in_order_of(empty({numel_of(shape)}, dtype, device), shape, strides);
}

Tensor contiguous_rows(const Tensor& x) { return x.stride(-1) == 1 || x.size(-1) == 1 ? x : contiguous(detach(x)); }

}  // namespace linea::ops_detail
