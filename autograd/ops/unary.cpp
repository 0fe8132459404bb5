// Unary elementwise ops. Each backward is written with other differentiable ops, as the
// derivative times the incoming gradient; "forward was ..." says what is being differentiated.
#include <limits>

#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {

// What a derivative is computed from. Only that tensor is saved: the other may then be changed
// in place before backward without an error, and its memory is not held for backward.
enum class From { Input, Output };

// y = kernel(x), with backward gy * derivative(x or y, as `from` says).
template <class Derivative>
Tensor unary_op(const char* name, UnaryOp op, const Tensor& x, From from, Derivative derivative, UnaryArgs args = {}) {
  check_floating(x, name);
  Tensor y = unary_kernel(op, x, args);
  const SavedTensor saved(from == From::Input ? x : y);
  return record(name, {x}, y, [saved, derivative](const Tensor& gy) -> Grads { return {gy * derivative(saved.get())}; });
}

// gy * derivative(x) in one pass (Backend::unary_grad), for the derivative helper kernels; itself
// differentiable in gy (for double backward).
Tensor times_derivative(const Tensor& gy, UnaryOp derivative, const Tensor& x, UnaryArgs args) {
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  backend_for(x).unary_grad(derivative, x, gy, out, args);
  return record("activation_backward", {gy}, out, [x, derivative, args](const Tensor& gg) -> Grads {
    return {times_derivative(gg, derivative, x, args)};
  });
}

// y = kernel(x) for an activation whose derivative is a helper kernel: backward gy * derivative(x)
// fused, one pass over memory rather than the derivative and then the product.
Tensor activation_op(const char* name, UnaryOp op, UnaryOp derivative, const Tensor& x, UnaryArgs args = {}) {
  check_floating(x, name);
  Tensor y = unary_kernel(op, x, args);
  return record(name, {x}, y, [xs = SavedTensor(x), derivative, args](const Tensor& gy) -> Grads {
    return {times_derivative(gy, derivative, xs.get(), args)};
  });
}

}  // namespace

Tensor neg(const Tensor& x) {
  check_floating(x, "neg");
  Tensor y = unary_kernel(UnaryOp::Neg, x);
  return record("neg", {x}, y, [](const Tensor& gy) -> Grads { return {neg(gy)}; });
}

// forward was y = e^x: dy/dx = y.
Tensor exp(const Tensor& x) {
  return unary_op("exp", UnaryOp::Exp, x, From::Output, [](const Tensor& y) { return y; });
}
// forward was y = log x: dy/dx = 1/x.
Tensor log(const Tensor& x) {
  return unary_op("log", UnaryOp::Log, x, From::Input, [](const Tensor& x) { return reciprocal(x); });
}
// forward was y = sqrt x: dy/dx = 1 / (2y).
Tensor sqrt(const Tensor& x) {
  return unary_op("sqrt", UnaryOp::Sqrt, x, From::Output, [](const Tensor& y) { return 0.5 / y; });
}
// forward was y = x^(-1/2): dy/dx = -y^3 / 2.
Tensor rsqrt(const Tensor& x) {
  return unary_op("rsqrt", UnaryOp::Rsqrt, x, From::Output, [](const Tensor& y) { return -0.5 * y * y * y; });
}
// forward was y = |x|: dy/dx = sign(x) (0 at the kink).
Tensor abs(const Tensor& x) {
  return unary_op("abs", UnaryOp::Abs, x, From::Input, [](const Tensor& x) { return sign(x); });
}
Tensor sin(const Tensor& x) {
  return unary_op("sin", UnaryOp::Sin, x, From::Input, [](const Tensor& x) { return cos(x); });
}
Tensor cos(const Tensor& x) {
  return unary_op("cos", UnaryOp::Cos, x, From::Input, [](const Tensor& x) { return neg(sin(x)); });
}
// forward was y = tanh x: dy/dx = 1 - y^2.
Tensor tanh(const Tensor& x) {
  return unary_op("tanh", UnaryOp::Tanh, x, From::Output, [](const Tensor& y) { return 1.0 - y * y; });
}
// forward was y = sigmoid x: dy/dx = y (1 - y).
Tensor sigmoid(const Tensor& x) {
  return unary_op("sigmoid", UnaryOp::Sigmoid, x, From::Output, [](const Tensor& y) { return y * (1.0 - y); });
}
// forward was y = log sigmoid x: dy/dx = 1 - sigmoid(x) = sigmoid(-x).
Tensor logsigmoid(const Tensor& x) {
  return unary_op("logsigmoid", UnaryOp::LogSigmoid, x, From::Input, [](const Tensor& x) { return sigmoid(neg(x)); });
}
// forward was y = log(1 + e^x): dy/dx = sigmoid(x).
Tensor softplus(const Tensor& x) {
  return unary_op("softplus", UnaryOp::Softplus, x, From::Input, [](const Tensor& x) { return sigmoid(x); });
}
// forward was y = max(x, 0): dy/dx = [x > 0].
Tensor relu(const Tensor& x) {
  return activation_op("relu", UnaryOp::Relu, UnaryOp::Step, x);
}
// forward was y = x (x > 0), alpha (e^x - 1) otherwise: dy/dx = 1 or alpha e^x.
Tensor elu(const Tensor& x, double alpha) {
  return activation_op("elu", UnaryOp::Elu, UnaryOp::EluGrad, x, {alpha, 0});
}
Tensor gelu(const Tensor& x, GeluApprox approx) {
  if (approx == GeluApprox::Tanh) return activation_op("gelu_tanh", UnaryOp::GeluTanh, UnaryOp::GeluTanhGrad, x);
  return activation_op("gelu", UnaryOp::GeluErf, UnaryOp::GeluErfGrad, x);
}
// forward was y = x sigmoid(x): dy/dx = s + x s (1 - s), s = sigmoid(x).
Tensor silu(const Tensor& x) {
  return unary_op("silu", UnaryOp::Silu, x, From::Input, [](const Tensor& x) {
    const Tensor s = sigmoid(x);
    return s * (1.0 + x * (1.0 - s));
  });
}
// forward was y = x^p: dy/dx = p x^(p-1).
Tensor pow(const Tensor& x, double exponent) {
  return unary_op(
      "pow", UnaryOp::Pow, x, From::Input,
      [exponent](const Tensor& x) { return exponent * pow(x, exponent - 1.0); }, {exponent, 0});
}
// forward was y = min(max(x, lo), hi): dy/dx = [lo < x < hi].
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  const double lo = min.value_or(-std::numeric_limits<double>::infinity());
  const double hi = max.value_or(std::numeric_limits<double>::infinity());
  LINEA_CHECK(!(lo > hi), "clamp", "min ", lo, " is above max ", hi);
  return unary_op(
      "clamp", UnaryOp::Clamp, x, From::Input,
      [lo, hi](const Tensor& x) {
        return to(logical_and(gt(x, scalar_like(lo, x)), lt(x, scalar_like(hi, x))), x.dtype());
      },
      {lo, hi});
}
// forward was y = x^2: dy/dx = 2x.
Tensor square(const Tensor& x) {
  return unary_op("square", UnaryOp::Square, x, From::Input, [](const Tensor& x) { return 2.0 * x; });
}
// forward was y = 1/x: dy/dx = -y^2.
Tensor reciprocal(const Tensor& x) {
  return unary_op("reciprocal", UnaryOp::Reciprocal, x, From::Output, [](const Tensor& y) { return neg(y * y); });
}
// forward was y = log(1 + x): dy/dx = 1 / (1 + x).
Tensor log1p(const Tensor& x) {
  return unary_op("log1p", UnaryOp::Log1p, x, From::Input, [](const Tensor& x) { return reciprocal(1.0 + x); });
}
// forward was y = e^x - 1: dy/dx = y + 1.
Tensor expm1(const Tensor& x) {
  return unary_op("expm1", UnaryOp::Expm1, x, From::Output, [](const Tensor& y) { return y + 1.0; });
}

Tensor sign(const Tensor& x) {
  check_floating(x, "sign");
  return unary_kernel(UnaryOp::Sign, x);  // piecewise constant: no gradient
}

}  // namespace linea
