// Views share storage with their input (tensor/view.h); their backward maps the gradient back
// onto the input's shape. Copies (contiguous, clone, to, cat) live here too.
#include <numeric>

#include "autograd/ops/common.h"
#include "tensor/view.h"

namespace linea {

using namespace ops_detail;

// y = x seen with another shape. backward: the gradient seen with x's shape.
namespace {
// y, a view of x, with x's gradient home seen through the same view (autograd/node.h).
Tensor with_home_of(const Tensor& x, const Tensor& y, std::function<Tensor(const Tensor&)> view_of) {
  autograd::set_gradient_home(y, autograd::home_through_view(autograd::gradient_home(x), std::move(view_of)));
  return y;
}
}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  check_defined(x, "view");
  Tensor y = record("view", {x}, views::view(x, shape),
                    [in_shape = x.shape()](const Tensor& gy) -> Grads { return {reshape(gy, in_shape)}; });
  return with_home_of(x, y, [shape](const Tensor& t) { return views::view(t, shape); });
}

Tensor reshape(const Tensor& x, const Shape& shape_in) {
  check_defined(x, "reshape");
  const Shape shape = views::infer_size(shape_in, x.numel(), "reshape");
  if (views::strides_for_view(x, shape)) return view(x, shape);
  return view(clone(x), shape);
}

// y = x with dims reordered. backward: reorder back with the inverse permutation.
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  check_defined(x, "permute");
  Tensor y = views::permute(x, dims);
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[normalize_dim(dims[i], x.dim(), "permute")] = static_cast<int64_t>(i);
  y = record("permute", {x}, y, [inverse](const Tensor& gy) -> Grads { return {permute(gy, inverse)}; });
  return with_home_of(x, y, [dims](const Tensor& t) { return views::permute(t, dims); });
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  check_defined(x, "transpose");
  const int64_t d0 = normalize_dim(dim0, x.dim(), "transpose"), d1 = normalize_dim(dim1, x.dim(), "transpose");
  std::vector<int64_t> dims(x.dim());
  std::iota(dims.begin(), dims.end(), 0);
  if (x.dim() > 0) std::swap(dims[d0], dims[d1]);  // a 0-dim tensor accepts dim 0 and is its own transpose
  return permute(x, dims);
}

Tensor t(const Tensor& x) {
  check_defined(x, "t");
  LINEA_CHECK(x.dim() == 2, "t", "expects a 2-D tensor, got ", x.describe());
  return transpose(x, 0, 1);
}

// y = x[start:end:step] along dim. backward: the gradient placed into zeros at those positions.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  check_defined(x, "slice");
  Tensor y = views::slice(x, dim, start, end, step);
  return record("slice", {x}, y, [x_shape = x.shape(), dim = normalize_dim(dim, x.dim(), "slice"), start, end,
                                  step](const Tensor& gy) -> Grads {
    Tensor gx = zeros(x_shape, {gy.dtype(), gy.device()});
    copy_into(views::slice(gx, dim, start, end, step), gy);
    return {gx};
  });
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  const int64_t d = dim_along(x, dim, "narrow");
  const int64_t size = x.size(d);
  if (start < 0) start += size;
  LINEA_CHECK(start >= 0 && length >= 0 && start + length <= size, "narrow", "range [", start, ", ",
              start + length, ") is outside dim ", d, " of ", x.describe());
  return slice(x, d, start, start + length, 1);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  const int64_t d = dim_along(x, dim, "select");
  const int64_t size = x.size(d);
  LINEA_CHECK(index >= -size && index < size, "select", "index ", index, " is out of range for dim ", d,
              " of ", x.describe());
  return squeeze(narrow(x, d, index < 0 ? index + size : index, 1), d);
}

// y = x broadcast to shape (stride 0). backward: sum over the broadcast dims.
Tensor expand(const Tensor& x, const Shape& shape) {
  check_defined(x, "expand");
  Tensor y = views::expand(x, shape);
  return record("expand", {x}, y, [in_shape = x.shape()](const Tensor& gy) -> Grads { return {sum_to(gy, in_shape)}; });
}

namespace {
// A view with size-1 dims removed or added; backward restores x's shape.
Tensor reshaping_view(const char* name, const Tensor& x, Tensor y) {
  return record(name, {x}, y, [in_shape = x.shape()](const Tensor& gy) -> Grads { return {reshape(gy, in_shape)}; });
}
}  // namespace

Tensor squeeze(const Tensor& x) {
  check_defined(x, "squeeze");
  std::vector<int64_t> all(x.dim());
  std::iota(all.begin(), all.end(), 0);
  return reshaping_view("squeeze", x, views::squeeze(x, all));
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  check_defined(x, "squeeze");
  if (x.dim() == 0) return reshaping_view("squeeze", x, views::squeeze(x, {}));
  return reshaping_view("squeeze", x, views::squeeze(x, {normalize_dim(dim, x.dim(), "squeeze")}));
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  check_defined(x, "unsqueeze");
  return reshaping_view("unsqueeze", x, views::unsqueeze(x, dim));
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  check_defined(x, "flatten");
  if (x.dim() == 0) return reshape(x, {1});
  const int64_t s = normalize_dim(start_dim, x.dim(), "flatten"), e = normalize_dim(end_dim, x.dim(), "flatten");
  LINEA_CHECK(s <= e, "flatten", "start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape shape(x.shape().begin(), x.shape().begin() + s);
  int64_t merged = 1;
  for (int64_t d = s; d <= e; ++d) merged *= x.size(d);
  shape.push_back(merged);
  shape.insert(shape.end(), x.shape().begin() + e + 1, x.shape().end());
  return reshape(x, shape);
}

// y = a fresh contiguous copy of x. backward: the gradient unchanged.
Tensor clone(const Tensor& x) {
  check_defined(x, "clone");
  Tensor y = copy_to(x, x.device());
  return record("clone", {x}, y, [](const Tensor& gy) -> Grads { return {gy}; });
}

Tensor contiguous(const Tensor& x) {
  check_defined(x, "contiguous");
  return x.is_contiguous() ? x : clone(x);
}

Tensor detach(const Tensor& x) {
  check_defined(x, "detach");
  return autograd::alias_without_autograd(x);
}

Tensor to(const Tensor& x, Device device) {
  check_defined(x, "to");
  if (x.device() == device) return x;
  Tensor y = rethrow_as("to", "cannot move " + x.describe() + " to " + device.str(), [&] { return copy_to(x, device); });
  return record("to_device", {x}, y, [from = x.device()](const Tensor& gy) -> Grads { return {to(gy, from)}; });
}

Tensor to(const Tensor& x, DType dtype) {
  check_defined(x, "to");
  if (x.dtype() == dtype) return x;
  Tensor y = empty(x.shape(), dtype, x.device());
  copy_into(y, x);
  if (!is_floating(dtype) || !is_floating(x.dtype())) return y;  // no gradient through ints/bools
  return record("to_dtype", {x}, y, [from = x.dtype()](const Tensor& gy) -> Grads { return {to(gy, from)}; });
}

// y = the inputs placed one after another along dim. backward: each input's slice of the gradient.
Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  LINEA_CHECK(!xs.empty(), "cat", "needs at least one tensor");
  const Tensor& first = xs[0];
  check_defined(first, "cat");
  const int64_t d = normalize_dim(dim, first.dim(), "cat");
  LINEA_CHECK(first.dim() > 0, "cat", "cannot concatenate 0-dim tensors; use stack()");
  Shape shape = first.shape();
  shape[d] = 0;
  for (const Tensor& x : xs) {
    check_compatible(first, x, "cat", true);
    LINEA_CHECK(x.dim() == first.dim(), "cat", "tensors differ in rank: ", first.describe(), " and ", x.describe());
    for (int64_t k = 0; k < x.dim(); ++k)
      LINEA_CHECK(k == d || x.size(k) == first.size(k), "cat", "sizes differ outside dim ", d, ": ",
                  first.describe(), " and ", x.describe());
    shape[d] += x.size(d);
  }
  Tensor y = empty(shape, first.dtype(), first.device());
  std::vector<int64_t> sizes;
  int64_t at = 0;
  for (const Tensor& x : xs) {
    copy_into(views::slice(y, d, at, at + x.size(d), 1), x);
    sizes.push_back(x.size(d));
    at += x.size(d);
  }
  return record("cat", xs, y, [sizes, d](const Tensor& gy) -> Grads { return split(gy, sizes, d); });
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  LINEA_CHECK(!xs.empty(), "stack", "needs at least one tensor");
  check_defined(xs[0], "stack");
  const int64_t d = normalize_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (const Tensor& x : xs) {
    check_defined(x, "stack");
    LINEA_CHECK(x.shape() == xs[0].shape(), "stack", "all tensors need one shape, got ", xs[0].describe(),
                " and ", x.describe());
    expanded.push_back(unsqueeze(x, d));
  }
  return cat(expanded, d);
}

namespace {

// The buffer a split's backward assembles x's gradient in, made when a piece's home is first
// claimed (by the op that produces that piece's gradient) or else by the backward itself, and
// handed over by it (a retained graph's next backward starts a new one).
struct SplitGradient {
  Shape shape;
  DType dtype;
  Device device;
  int64_t dim;
  std::vector<int64_t> starts, sizes;
  Tensor buffer;
  std::vector<bool> claimed;

  Tensor whole() {
    if (!buffer.defined()) buffer = empty(shape, dtype, device);
    return buffer;
  }
  Tensor place(int64_t i) { return views::slice(whole(), dim, starts[i], starts[i] + sizes[i], 1); }
};

class SplitPieceHome final : public autograd::GradientHome {
 public:
  SplitPieceHome(std::shared_ptr<SplitGradient> split, int64_t piece) : split_(std::move(split)), piece_(piece) {}
  Tensor claim() override {
    if (split_->claimed[piece_]) return Tensor();
    split_->claimed[piece_] = true;
    return split_->place(piece_);
  }

 private:
  std::shared_ptr<SplitGradient> split_;
  int64_t piece_;
};

// The same elements of the same memory.
bool same_place(const Tensor& a, const Tensor& b) {
  return a.storage().get() == b.storage().get() && a.offset() == b.offset() && a.shape() == b.shape() &&
         a.strides() == b.strides();
}

}  // namespace

// The pieces are views of x, outputs of one node (autograd/node.h: record_outputs). Its backward
// writes each piece's gradient into that piece's place in one buffer of x's shape, and zeros only
// where a piece got none. As views with a node each, every piece's gradient would be padded with
// zeros to x's size and the pieces' sums added: a linear attention layer splits its q, k, v and
// gate projections out of one product (nn/layers/stacked_projection.h), where that cost more than
// the product it saved. Each piece's place is also its gradient home (autograd/node.h): an op
// that makes a piece's gradient writes it there directly, and the copy into place is skipped.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  const int64_t d = dim_along(x, dim, "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    LINEA_CHECK(s >= 0, "split", "negative size ", s);
    total += s;
  }
  LINEA_CHECK(total == x.size(d), "split", "sizes sum to ", total, " but dim ", d, " of ", x.describe(),
              " has ", x.size(d));
  auto gradient = std::make_shared<SplitGradient>();
  *gradient = {x.shape(), x.dtype(), x.device(), d, {}, sizes, Tensor(), std::vector<bool>(sizes.size(), false)};
  std::vector<Tensor> pieces;
  int64_t at = 0;
  for (int64_t s : sizes) {
    pieces.push_back(views::slice(x, d, at, at + s, 1));
    gradient->starts.push_back(at);
    at += s;
  }
  pieces = record_outputs("split", {x}, std::move(pieces), [gradient](const std::vector<Tensor>& g) -> Grads {
    Tensor gx = gradient->whole();
    for (size_t i = 0; i < g.size(); ++i) {
      Tensor place = gradient->place(static_cast<int64_t>(i));
      if (!g[i].defined()) fill_(place, 0.0);
      else if (!same_place(g[i], place)) copy_into(place, g[i]);
    }
    gradient->buffer = Tensor();
    gradient->claimed.assign(g.size(), false);
    return {gx};
  });
  if (autograd::needs_grad({x}))
    for (size_t i = 0; i < pieces.size(); ++i)
      autograd::set_gradient_home(pieces[i], std::make_shared<SplitPieceHome>(gradient, static_cast<int64_t>(i)));
  return pieces;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  const int64_t size = x.size(dim_along(x, dim, "split"));
  LINEA_CHECK(split_size > 0, "split", "split_size must be positive, got ", split_size);
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < size; at += split_size) sizes.push_back(std::min(split_size, size - at));
  return split(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  const int64_t size = x.size(dim_along(x, dim, "chunk"));
  LINEA_CHECK(chunks > 0, "chunk", "chunks must be positive, got ", chunks);
  return split(x, std::max<int64_t>(1, (size + chunks - 1) / chunks), dim);
}

}  // namespace linea
