// Softmax, log-softmax and cross-entropy: hot paths with fused forward and backward kernels
// (tests/autograd check each against its composite formula).
#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {

Tensor softmax_op(const char* name, const Tensor& x, int64_t dim, bool log) {
  check_floating(x, name);
  const int64_t d = normalize_dim(dim, x.dim(), name);
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  if (x.dim() == 0) {  // one element: softmax 1, log_softmax 0
    fill_(y, log ? 0.0 : 1.0);
  } else {
    backend_for(x).softmax(x, d, log, y);
  }
  // forward was y = softmax(x): dx = y (dy - sum(dy y));  log_softmax: dx = dy - e^y sum(dy).
  return record(name, {x}, y, [ys = SavedTensor(y), d, log](const Tensor& gy) -> Grads {
    const Tensor y = ys.get();
    Tensor gx = empty(y.shape(), y.dtype(), y.device());
    if (y.dim() == 0) fill_(gx, 0.0);
    else backend_for(y).softmax_backward(y, gy, d, log, gx);
    return {gx};
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op("softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op("log_softmax", x, dim, true); }

// Per-row losses lse(x) - x[target] from one fused pass; the mean divides by the number of rows
// whose target is not ignore_index. bfloat16 logits give float32 losses (computed in float32).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Reduction reduction) {
  check_floating(logits, "cross_entropy");
  check_index_tensor(targets, logits, "cross_entropy");
  LINEA_CHECK(logits.dim() >= 1, "cross_entropy", "logits need a class dim, got ", logits.describe());
  const Shape row_shape(logits.shape().begin(), logits.shape().end() - 1);
  LINEA_CHECK(targets.shape() == row_shape, "cross_entropy", "targets ", targets.describe(),
              " must have the logits' shape without the class dim: ", shape_str(row_shape), " for logits ",
              logits.describe());
  const int64_t classes = logits.size(-1), rows = numel_of(row_shape);
  LINEA_CHECK(classes > 0, "cross_entropy", "logits have no classes: ", logits.describe());
  const Tensor flat_logits = reshape(logits, {rows, classes});
  const Tensor flat_targets = reshape(targets, {rows});

  const DType loss_dtype = compute_dtype(logits.dtype());  // float32 for bfloat16 logits
  Tensor losses = empty({rows}, loss_dtype, logits.device());
  Tensor lse = empty({rows}, loss_dtype, logits.device());
  backend_for(logits).cross_entropy(flat_logits, flat_targets, ignore_index, losses, lse);
  losses = record("cross_entropy", {flat_logits}, losses,
                  [xs = SavedTensor(flat_logits), ts = SavedTensor(flat_targets), ls = SavedTensor(lse),
                   ignore_index](const Tensor& gloss) -> Grads {
                    // The gradient takes the logits' own memory when this backward is their last
                    // reader and nothing else holds them (SavedTensor::overwritable): each element
                    // is read before the same thread writes its gradient over it. At a language
                    // model's head the logits and their gradient are the step's two largest
                    // tensors, alive together at its peak (autograd/README.md).
                    Tensor x = xs.overwritable();
                    const bool in_place = x.defined() && x.is_contiguous();
                    if (!in_place) x = xs.get();
                    const Tensor gx = in_place ? x : empty(x.shape(), x.dtype(), x.device());
                    backend_for(x).cross_entropy_backward(x, ts.get(), ignore_index, ls.get(), gloss, gx);
                    return {gx};
                  });
  switch (reduction) {
    case Reduction::None: return reshape(losses, row_shape);
    case Reduction::Sum: return sum(losses);
    case Reduction::Mean: {
      const Tensor counted = to(ne(flat_targets, full({}, static_cast<double>(ignore_index), {kInt64, targets.device()})),
                                loss_dtype);
      return sum(losses) / sum(counted);
    }
  }
  return losses;
}

}  // namespace linea
