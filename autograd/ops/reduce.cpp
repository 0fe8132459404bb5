// Reductions over any set of dims (an empty list means all), cumulative sums, and sum_to, the
// adjoint of broadcasting.
#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/ops/common.h"
#include "tensor/view.h"

namespace linea {

using namespace ops_detail;

namespace {

// Runs a reduction kernel. The kernel writes a keepdim-shaped contiguous tensor, which is
// reshaped (for free) when the reduced dims are dropped.
Tensor reduce_kernel(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, DType out_dtype) {
  Tensor out = empty(reduced_shape(x.shape(), dims, true), out_dtype, x.device());
  backend_for(x).reduce(op, x, dims, out);
  if (keepdim) return out;
  const Shape shape = reduced_shape(x.shape(), dims, false);
  return make_view(out, shape, contiguous_strides(shape), 0);
}

// The gradient of a reduction's output brought back to x's shape: reinsert the reduced dims as
// size 1, then broadcast.
Tensor unreduce(const Tensor& gy, const Shape& x_shape, const std::vector<int64_t>& dims) {
  return expand(reshape(gy, reduced_shape(x_shape, dims, true)), x_shape);
}

int64_t count_reduced(const Shape& shape, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= shape[d];
  return n;
}

// amax/amin: the gradient flows to the positions holding the extreme value, split evenly on ties.
Tensor extreme(const char* name, ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  check_floating(x, name);
  const std::vector<int64_t> dims = normalize_dims(dims_in, x.dim(), name);
  for (int64_t d : dims)
    LINEA_CHECK(x.shape()[d] > 0, name, "cannot reduce over dim ", d, " of size 0 in ", x.describe());
  Tensor y = reduce_kernel(op, x, dims, keepdim, x.dtype());
  return record(name, {x}, y, [xs = SavedTensor(x), ys = SavedTensor(y), dims](const Tensor& gy) -> Grads {
    const Tensor x = xs.get();
    const Tensor hits = to(eq(x, unreduce(ys.get(), x.shape(), dims)), x.dtype());
    const Tensor count = sum(hits, dims, true);
    return {hits * unreduce(gy, x.shape(), dims) / expand(count, x.shape())};
  });
}

Tensor arg_extreme(const char* name, ReduceOp op, const Tensor& x, int64_t dim, bool keepdim) {
  check_floating(x, name);
  const int64_t d = normalize_dim(dim, x.dim(), name);
  LINEA_CHECK(x.dim() == 0 || x.shape()[d] > 0, name, "cannot reduce over dim ", d, " of size 0 in ", x.describe());
  return reduce_kernel(op, x, x.dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{d}, keepdim, kInt64);
}

}  // namespace

// y = sum of x over dims. backward: gy broadcast back over the summed dims.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  check_floating(x, "sum");
  const std::vector<int64_t> dims = normalize_dims(dims_in, x.dim(), "sum");
  Tensor y = reduce_kernel(ReduceOp::Sum, x, dims, keepdim, x.dtype());
  return record("sum", {x}, y, [x_shape = x.shape(), dims](const Tensor& gy) -> Grads { return {unreduce(gy, x_shape, dims)}; });
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  check_floating(x, "mean");
  const std::vector<int64_t> dims = normalize_dims(dims_in, x.dim(), "mean");
  const int64_t n = count_reduced(x.shape(), dims);
  return sum(x, dims, keepdim) * (n > 0 ? 1.0 / static_cast<double>(n) : std::nan(""));
}

Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme("amax", ReduceOp::Max, x, dims, keepdim);
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme("amin", ReduceOp::Min, x, dims, keepdim);
}
Tensor max(const Tensor& x) { return amax(x); }
Tensor min(const Tensor& x) { return amin(x); }

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return arg_extreme("argmax", ReduceOp::ArgMax, x, dim, keepdim); }
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) { return arg_extreme("argmin", ReduceOp::ArgMin, x, dim, keepdim); }

// log sum exp x, shifted by the (detached) max so nothing overflows; composite, so its gradient
// softmax(x) comes from the ops it is made of.
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  check_floating(x, "logsumexp");
  const std::vector<int64_t> dims = normalize_dims(dims_in, x.dim(), "logsumexp");
  if (x.numel() == 0) return log(sum(exp(x), dims, keepdim));
  Tensor shift = detach(amax(x, dims, true));
  // Rows that are all -inf (or hold inf/nan) get shift 0, so x - shift is never inf - inf.
  const Tensor finite = lt(abs(shift), scalar_like(std::numeric_limits<double>::infinity(), shift));
  shift = where(finite, shift, scalar_like(0.0, shift));
  Tensor y = log(sum(exp(x - shift), dims, true)) + shift;
  return keepdim ? y : reshape(y, reduced_shape(x.shape(), dims, false));
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims_in, int64_t correction, bool keepdim) {
  check_floating(x, "var");
  const std::vector<int64_t> dims = normalize_dims(dims_in, x.dim(), "var");
  const int64_t n = count_reduced(x.shape(), dims);
  const Tensor centered = x - mean(x, dims, true);
  return sum(centered * centered, dims, keepdim) / static_cast<double>(std::max<int64_t>(n - correction, 0));
}

// y_t = sum_{s<=t} x_s. backward: gx_s = sum_{t>=s} gy_t, the reverse cumulative sum.
Tensor cumsum(const Tensor& x, int64_t dim, bool reverse) {
  check_floating(x, "cumsum");
  const int64_t d = normalize_dim(dim, x.dim(), "cumsum");
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  if (x.dim() == 0) copy_into(y, x);
  else backend_for(x).cumsum(x, d, reverse, y);
  return record("cumsum", {x}, y, [d, reverse](const Tensor& gy) -> Grads {
    return {gy.dim() == 0 ? gy : cumsum(gy, d, !reverse)};
  });
}

// y_t = x_{t-1} - x_t. Forward: one subtraction over positions 1.. and one pass for position 0
// (before - x_0, or a fill of 0); backward: dx_t = dy_{t+1} - dy_t for t < n - 1, dx_{n-1} =
// -dy_{n-1}, and without `before` y_0 is the constant 0, so dx_0 = dy_1 (0 when n = 1); d before =
// dy_0. The composite it replaces (a cat of before and x's shifted view, a subtraction) took three
// kernels forward and seven backward, whose zero-padded slices were added up.
Tensor previous_minus(const Tensor& x, int64_t dim, const Tensor& before) {
  const char* op = "previous_minus";
  check_defined(x, op);
  check_floating(x, op);
  const int64_t d = dim_along(x, dim, op);
  const int64_t n = x.size(d);
  if (before.defined()) {
    check_compatible(x, before, op);
    Shape want = x.shape();
    want[d] = 1;
    LINEA_CHECK(before.shape() == want, op, "before must be ", shape_str(want), " (x ", x.describe(),
                " with size 1 along dim ", d, "), got ", before.describe());
  }
  const auto part = [d](const Tensor& t, int64_t start, int64_t end) { return views::slice(t, d, start, end, 1); };
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  if (y.numel() > 0) {
    const Backend& backend = backend_for(x);
    if (before.defined()) backend.binary(BinaryOp::Sub, before, part(x, 0, 1), part(y, 0, 1));
    else backend.fill(part(y, 0, 1), 0.0);
    if (n > 1) backend.binary(BinaryOp::Sub, part(x, 0, n - 1), part(x, 1, n), part(y, 1, n));
  }
  const Shape before_shape = before.defined() ? before.shape() : Shape{};
  return record(op, {x, before}, y, [n, part, before_shape, has_before = before.defined()](const Tensor& gy) -> Grads {
    Tensor gx = empty(gy.shape(), gy.dtype(), gy.device());
    if (gy.numel() == 0) return {gx, has_before ? zeros(before_shape, {gy.dtype(), gy.device()}) : Tensor()};
    const Backend& backend = backend_for(gy);
    if (n > 1) backend.binary(BinaryOp::Sub, part(gy, 1, n), part(gy, 0, n - 1), part(gx, 0, n - 1));
    backend.unary(UnaryOp::Neg, part(gy, n - 1, n), part(gx, n - 1, n), {});
    if (!has_before) {
      if (n > 1) backend.copy(part(gy, 1, 2), part(gx, 0, 1));
      else backend.fill(part(gx, 0, 1), 0.0);
    }
    return {gx, has_before ? part(gy, 0, 1) : Tensor()};
  });
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  check_defined(x, "sum_to");
  if (x.shape() == shape) return x;
  LINEA_CHECK(broadcast_shapes(shape, x.shape(), "sum_to") == x.shape(), "sum_to", "cannot sum ",
              x.describe(), " down to shape ", shape_str(shape));
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && x.size(d) != 1)) dims.push_back(d);
  if (dims.empty()) return reshape(x, shape);
  return reshape(sum(x, dims, true), shape);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  check_compatible(a, b, "max_abs_diff");
  if (a.numel() == 0 && b.numel() == 0) return 0.0;
  return amax(abs(a - b)).item();
}

}  // namespace linea
