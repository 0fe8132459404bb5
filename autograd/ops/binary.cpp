// Binary elementwise ops with NumPy broadcasting. Backward computes a gradient only for the
// operands that need one, then sums it over the dims that were broadcast (sum_to).
#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {

// Which of a, b and y a backward formula reads. Only those are saved: the others may then be
// changed in place before backward without an error, and their memory is not held for backward.
struct Reads {
  bool a = false, b = false, y = false;
};

// Records a binary op whose backward gives the two full-shape partial gradients (before
// sum_to); `grads(gy, a, b, y, need_a, need_b)` may leave an unneeded one undefined, and gets
// undefined tensors for what `reads(need_a, need_b)` leaves out.
template <class ReadsFn, class GradFn>
Tensor binary_op(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, ReadsFn reads, GradFn grads) {
  Tensor y = binary_kernel(op, a, b, name);
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  const Reads r = reads(need_a, need_b);
  const auto save = [](bool read, const Tensor& t) { return SavedTensor(read ? t : Tensor()); };
  return record(name, {a, b}, y,
                [as = save(r.a, a), bs = save(r.b, b), ys = save(r.y, y), need_a, need_b, grads,
                 a_shape = a.shape(), b_shape = b.shape()](const Tensor& gy) -> Grads {
                  auto [ga, gb] = grads(gy, as.get(), bs.get(), ys.get(), need_a, need_b);
                  return {need_a ? sum_to(ga, a_shape) : Tensor(), need_b ? sum_to(gb, b_shape) : Tensor()};
                });
}

using Pair = std::pair<Tensor, Tensor>;

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binary_op("add", BinaryOp::Add, a, b, [](bool, bool) { return Reads{}; },
                   [](const Tensor& gy, const Tensor&, const Tensor&, const Tensor&, bool, bool) { return Pair{gy, gy}; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return binary_op("sub", BinaryOp::Sub, a, b, [](bool, bool) { return Reads{}; },
                   [](const Tensor& gy, const Tensor&, const Tensor&, const Tensor&, bool, bool need_b) {
                     return Pair{gy, need_b ? neg(gy) : Tensor()};
                   });
}

// forward was y = a b: dy/da = b, dy/db = a.
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary_op("mul", BinaryOp::Mul, a, b,
                   [](bool need_a, bool need_b) { return Reads{.a = need_b, .b = need_a}; },
                   [](const Tensor& gy, const Tensor& a, const Tensor& b, const Tensor&, bool need_a, bool need_b) {
                     return Pair{need_a ? gy * b : Tensor(), need_b ? gy * a : Tensor()};
                   });
}

// forward was y = a / b: dy/da = 1/b, dy/db = -a/b^2 = -y/b.
Tensor div(const Tensor& a, const Tensor& b) {
  return binary_op("div", BinaryOp::Div, a, b, [](bool, bool need_b) { return Reads{.b = true, .y = need_b}; },
                   [](const Tensor& gy, const Tensor&, const Tensor& b, const Tensor& y, bool need_a, bool need_b) {
                     return Pair{need_a ? gy / b : Tensor(), need_b ? neg(gy * y / b) : Tensor()};
                   });
}

// forward was y = a^b: dy/da = b a^(b-1), dy/db = y log a.
Tensor pow(const Tensor& a, const Tensor& b) {
  return binary_op("pow", BinaryOp::Pow, a, b,
                   [](bool need_a, bool need_b) { return Reads{.a = true, .b = need_a, .y = need_b}; },
                   [](const Tensor& gy, const Tensor& a, const Tensor& b, const Tensor& y, bool need_a, bool need_b) {
                     return Pair{need_a ? gy * b * pow(a, b - 1.0) : Tensor(), need_b ? gy * y * log(a) : Tensor()};
                   });
}

namespace {
// The share of the gradient that goes to a in maximum/minimum: 1 where a wins, 1/2 on ties.
Tensor winner_weight(const Tensor& a, const Tensor& b, bool a_wins_when_greater) {
  const Tensor wins = to(a_wins_when_greater ? gt(a, b) : lt(a, b), a.dtype());
  const Tensor ties = to(eq(a, b), a.dtype());
  return wins + 0.5 * ties;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary_op("maximum", BinaryOp::Maximum, a, b, [](bool, bool) { return Reads{.a = true, .b = true}; },
                   [](const Tensor& gy, const Tensor& a, const Tensor& b, const Tensor&, bool, bool) {
                     const Tensor wa = winner_weight(a, b, true);
                     return Pair{gy * wa, gy * (1.0 - wa)};
                   });
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary_op("minimum", BinaryOp::Minimum, a, b, [](bool, bool) { return Reads{.a = true, .b = true}; },
                   [](const Tensor& gy, const Tensor& a, const Tensor& b, const Tensor&, bool, bool) {
                     const Tensor wa = winner_weight(a, b, false);
                     return Pair{gy * wa, gy * (1.0 - wa)};
                   });
}

Tensor eq(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Eq, a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Ne, a, b, "ne"); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Lt, a, b, "lt"); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Le, a, b, "le"); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Gt, a, b, "gt"); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Ge, a, b, "ge"); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::And, a, b, "logical_and"); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return binary_kernel(BinaryOp::Or, a, b, "logical_or"); }
Tensor logical_not(const Tensor& a) {
  check_defined(a, "logical_not");
  LINEA_CHECK(a.dtype() == kBool, "logical_not", "expects a bool tensor, got ", a.describe());
  return eq(a, full({}, 0.0, {kBool, a.device()}));
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(a, b), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(a, b), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(a, b), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(a, b), b); }

}  // namespace linea
