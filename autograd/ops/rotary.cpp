// Fused rotary position embedding: one kernel forward and one backward (the inverse rotation),
// instead of the composite x * cos + rotate_half(x) * sin with its slices, negation and
// concatenation, each a pass over the tensor forward and again backward
// (tests/autograd/fused_vs_composite_test.cpp checks the two against each other).
#include "autograd/ops/common.h"
#include "tensor/view.h"

namespace linea {

using namespace ops_detail;

namespace {

// y = x rotated by the angles of cos/sin (inverse: by minus them), the dims past 2 * half copied;
// y laid out in the memory order of `order` (strides of x's shape).
Tensor rotate(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Shape& order) {
  Tensor y = empty_in_order_of(x.shape(), order, x.dtype(), x.device());
  if (x.numel() > 0) {
    backend_for(x).rotary(contiguous_rows(x), cos, sin, inverse, y);  // the kernels read contiguous rows
  }
  // The rotation is orthogonal: its adjoint is the inverse rotation. The gradient takes x's memory
  // order, whatever gy's.
  return record(inverse ? "rotary_embedding_backward" : "rotary_embedding", {x}, y,
                [cos, sin, inverse, order = x.strides()](const Tensor& gy) -> Grads {
                  return {rotate(gy, cos, sin, !inverse, order)};
                });
}

}  // namespace

Tensor rotary_embedding(const Tensor& x, const Tensor& cos_, const Tensor& sin_) {
  const char* op = "rotary_embedding";
  check_floating(x, op);
  check_defined(cos_, op);
  check_defined(sin_, op);
  LINEA_CHECK(!cos_.requires_grad() && !sin_.requires_grad(), op,
              "cos and sin are constant tables and take no gradient; detach them");
  // The tables in the type the rotation computes in: float32 for bfloat16 x (bfloat16 tables are
  // widened).
  const DType table_dtype = compute_dtype(x.dtype());
  const Tensor cos = in_compute_dtype(cos_, x), sin = in_compute_dtype(sin_, x);
  for (const Tensor* t : {&cos, &sin}) {
    LINEA_CHECK(t->device() == x.device(), op, "the tables must be on x's device: ", t->describe(), " and ",
                x.describe());
    LINEA_CHECK(t->dtype() == table_dtype, op, "the tables must be ", dtype_name(table_dtype), " for ", x.describe(),
                ", got ", t->describe());
  }
  LINEA_CHECK(x.dim() >= 2, op, "expects x (..., T, dh), got ", x.describe());
  LINEA_CHECK(cos.dim() == 2 && cos.shape() == sin.shape() && cos.size(0) == x.size(-2) &&
                  2 * cos.size(1) <= x.size(-1),
              op, "expects cos and sin (T, half) with T = x's dim -2 and 2 half <= x's last dim, got x ",
              x.describe(), ", cos ", cos.describe(), ", sin ", sin.describe());
  // The tables' rows are read contiguously (a narrow of a longer table along positions is).
  return rotate(x, contiguous_rows(cos), contiguous_rows(sin), false, x.strides());
}

}  // namespace linea
