// Choosing between values by a Bool mask: where, masked_fill, and the triangular tril/triu.
#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {
void check_mask(const Tensor& mask, const Tensor& x, const char* op) {
  check_defined(mask, op);
  LINEA_CHECK(mask.dtype() == kBool, op, "the mask must be bool, got ", mask.describe());
  LINEA_CHECK(mask.device() == x.device(), op, "mask ", mask.describe(), " and tensor ", x.describe(),
              " are on different devices");
}
}  // namespace

// y = cond ? a : b. backward: the gradient goes to a where cond holds, to b elsewhere.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_compatible(a, b, "where", true);
  check_mask(cond, a, "where");
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor y = empty(shape, a.dtype(), a.device());
  backend_for(a).where(broadcast_view(cond, shape, "where"), broadcast_view(a, shape, "where"),
                       broadcast_view(b, shape, "where"), y);
  if (!is_floating(a.dtype())) return y;
  // Only the operands that need a gradient get one: masked_fill's constant never does.
  return record("where", {a, b}, y, [cs = SavedTensor(cond), a_shape = a.shape(), b_shape = b.shape(),
                                     need_a = a.requires_grad(), need_b = b.requires_grad()](const Tensor& gy) -> Grads {
    const Tensor zero = scalar_like(0.0, gy);
    return {need_a ? sum_to(where(cs.get(), gy, zero), a_shape) : Tensor(),
            need_b ? sum_to(where(cs.get(), zero, gy), b_shape) : Tensor()};
  });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_defined(x, "masked_fill");
  check_mask(mask, x, "masked_fill");
  LINEA_CHECK(broadcast_shapes(mask.shape(), x.shape(), "masked_fill") == x.shape(), "masked_fill",
              "mask ", mask.describe(), " must broadcast to the tensor's shape ", shape_str(x.shape()));
  return where(mask, full({}, value, {x.dtype(), x.device()}), x);
}

namespace {
Tensor triangle(const Tensor& x, int64_t k, bool lower, const char* op) {
  check_defined(x, op);
  LINEA_CHECK(x.dim() >= 2, op, "needs at least 2 dims, got ", x.describe());
  const Tensor keep = lower ? tril_mask(x.size(-2), x.size(-1), k, x.device())
                            : triu_mask(x.size(-2), x.size(-1), k, x.device());
  return where(keep, x, full({}, 0.0, {x.dtype(), x.device()}));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t k) { return triangle(x, k, true, "tril"); }
Tensor triu(const Tensor& x, int64_t k) { return triangle(x, k, false, "triu"); }

}  // namespace linea
