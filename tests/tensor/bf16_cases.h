#pragma once
// What the CPU's tests of the bfloat16 math (tests/tensor/bfloat16_test.cpp) and the GPU's parity
// with it (tests/cuda/bfloat16_test.cpp) share: the unary ops that take bfloat16, as a user calls
// them, each with the inputs it is defined on; the bound on softmax's bfloat16 gradient; and the
// norms' kernels called as the autograd op calls them, with the statistics in hand.
#include <cmath>
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "tensor/backend.h"

namespace linea::testing {

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> f;
  bool positive = false;  // needs x > 0 (log, sqrt, ...)
};
inline std::vector<UnaryCase> bf16_unary_cases() {
  return {{"neg", [](const Tensor& t) { return -t; }},
          {"exp", [](const Tensor& t) { return exp(t); }},
          {"log", [](const Tensor& t) { return log(t); }, true},
          {"sqrt", [](const Tensor& t) { return sqrt(t); }, true},
          {"rsqrt", [](const Tensor& t) { return rsqrt(t); }, true},
          {"abs", [](const Tensor& t) { return abs(t); }},
          {"sin", [](const Tensor& t) { return sin(t); }},
          {"cos", [](const Tensor& t) { return cos(t); }},
          {"tanh", [](const Tensor& t) { return tanh(t); }},
          {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
          {"logsigmoid", [](const Tensor& t) { return logsigmoid(t); }},
          {"softplus", [](const Tensor& t) { return softplus(t); }},
          {"relu", [](const Tensor& t) { return relu(t); }},
          {"elu", [](const Tensor& t) { return elu(t, 0.7); }},
          {"gelu", [](const Tensor& t) { return gelu(t); }},
          {"gelu_tanh", [](const Tensor& t) { return gelu(t, GeluApprox::Tanh); }},
          {"silu", [](const Tensor& t) { return silu(t); }},
          {"pow", [](const Tensor& t) { return pow(t, 1.5); }, true},
          {"clamp", [](const Tensor& t) { return clamp(t, -0.5, 0.75); }},
          {"square", [](const Tensor& t) { return square(t); }},
          {"reciprocal", [](const Tensor& t) { return reciprocal(t); }, true},
          {"log1p", [](const Tensor& t) { return log1p(t); }, true},
          {"expm1", [](const Tensor& t) { return expm1(t); }},
          {"sign", [](const Tensor& t) { return sign(t); }}};
}

// How far the gradient of (log_)softmax computed in bfloat16 may lie from the exact one, per
// element, for x and dy (bfloat16) along dim: the backward reads the forward's y rounded to
// bfloat16, and the gradient's cancellations magnify that rounding (u = 2^-8, the largest relative
// rounding error; the bound takes 2u for float32's own errors on top):
//   softmax      dx = y (dy - sum dy y): y' = y (1 + d), |d| <= u, so |dx' - dx| <=
//                u y |dy - sum dy y| + u y sum |dy| y, and the result's rounding u |dx|;
//   log_softmax  dx = dy - e^y sum dy: y' = y + e, |e| <= u |y|, so |dx' - dx| <=
//                e^y |sum dy| (e^(u |y|) - 1), and u |dx|.
// In float64, on the CPU.
inline Tensor bf16_softmax_gradient_bound(const Tensor& x, const Tensor& dy, int64_t dim, bool log) {
  const double u = std::ldexp(1.0, -8), margin = 2.0;
  const Tensor x64 = to(to(x, kCPU), kFloat64), g = to(to(dy, kCPU), kFloat64);
  if (log) {
    const Tensor y = log_softmax(x64, dim);
    const Tensor dx = g - exp(y) * sum(g, {dim}, true);
    return margin * (exp(y) * abs(sum(g, {dim}, true)) * expm1(abs(y) * u) + u * abs(dx)) + 1e-30;
  }
  const Tensor y = softmax(x64, dim);
  const Tensor dot = sum(g * y, {dim}, true);
  const Tensor dx = y * (g - dot);
  return margin * (u * y * (abs(g - dot) + sum(abs(g) * y, {dim}, true)) + u * abs(dx)) + 1e-30;
}

// |actual - expected| <= bound elementwise (all three of one shape).
inline ::testing::AssertionResult within_bound(const Tensor& actual, const Tensor& expected, const Tensor& bound) {
  const auto a = to(to(actual, kCPU), kFloat64).to_vector<double>(), e = to(to(expected, kCPU), kFloat64).to_vector<double>();
  const auto b = bound.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - e[i]) <= b[i]))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << e[i] << ", bound " << b[i];
  return ::testing::AssertionSuccess();
}

// A norm kernel's call: LayerNorm, or RMSNorm (no mean, no bias); x (rows, C); weight and bias
// (C) in compute_dtype(x) or undefined; y of dtype `out`.
struct NormCall {
  bool rms;
  Tensor x, weight, bias;
  DType out;
  double eps = 1e-5;
};
struct NormForward {
  Tensor y, mean, rstd;  // mean undefined for RMSNorm
};
struct NormBackward {
  Tensor dx, dweight, dbias;
};

inline NormForward norm_forward(const NormCall& c) {
  const DType stats = compute_dtype(c.x.dtype());
  const Shape rows{c.x.size(0)};
  NormForward f{empty(c.x.shape(), c.out, c.x.device()), c.rms ? Tensor() : empty(rows, stats, c.x.device()),
                empty(rows, stats, c.x.device())};
  if (c.rms) backend_for(c.x).rms_norm(c.x, c.weight, c.eps, f.y, f.rstd);
  else backend_for(c.x).layer_norm(c.x, c.weight, c.bias, c.eps, f.y, f.mean, f.rstd);
  return f;
}

// The backward from dy (y's dtype), with the forward's statistics, adding dx_add (x's dtype, or
// undefined); the parameter gradients where the call has the parameter.
inline NormBackward norm_backward(const NormCall& c, const NormForward& f, const Tensor& dy, const Tensor& dx_add) {
  const DType params = compute_dtype(c.x.dtype());
  const Shape cols{c.x.size(1)};
  NormBackward b{empty(c.x.shape(), c.x.dtype(), c.x.device()),
                 c.weight.defined() ? empty(cols, params, c.x.device()) : Tensor(),
                 c.bias.defined() ? empty(cols, params, c.x.device()) : Tensor()};
  if (c.rms) backend_for(c.x).rms_norm_backward(c.x, c.weight, f.rstd, dy, b.dx, b.dweight, dx_add);
  else backend_for(c.x).layer_norm_backward(c.x, c.weight, f.mean, f.rstd, dy, b.dx, b.dweight, b.dbias, dx_add);
  return b;
}

// t in float64 on t's device (undefined stays undefined).
inline Tensor as_float64(const Tensor& t) { return t.defined() ? to(t, kFloat64) : t; }

}  // namespace linea::testing
