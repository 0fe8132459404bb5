#pragma once
// The scalar formula of every elementwise op, written once for the CPU and CUDA kernels.
#include <cmath>

#include "tensor/host_device.h"

namespace linea::scalar {

using std::erf, std::exp, std::expm1, std::log, std::log1p, std::tanh;

template <class T> LINEA_HD T sigmoid(T x) {
  // Split by sign so that exp never overflows.
  if (x >= T(0)) return T(1) / (T(1) + exp(-x));
  const T e = exp(x);
  return e / (T(1) + e);
}

// log(1 + exp(x)) without overflow, and exact for very negative x.
template <class T> LINEA_HD T softplus(T x) {
  return (x > T(0) ? x : T(0)) + log1p(exp(-(x > T(0) ? x : -x)));
}

// log(sigmoid(x)) = -softplus(-x).
template <class T> LINEA_HD T log_sigmoid(T x) { return -softplus(-x); }

// Rotary position embedding of one pair (x1, x2) by the angle whose cosine and sine are c, s.
template <class T> LINEA_HD void rotate_pair(T x1, T x2, T c, T s, T& y1, T& y2) {
  y1 = x1 * c - x2 * s;
  y2 = x2 * c + x1 * s;
}

constexpr double kSqrt2OverPi = 0.79788456080286535587989;
constexpr double kInvSqrt2 = 0.70710678118654752440084;
constexpr double kInvSqrt2Pi = 0.39894228040143267793995;

template <class T> LINEA_HD T gelu_tanh(T x) {
  const T inner = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
  return T(0.5) * x * (T(1) + tanh(inner));
}

template <class T> LINEA_HD T gelu_tanh_grad(T x) {
  const T inner = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
  const T t = tanh(inner);
  const T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * 0.044715) * x * x);
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner;
}

template <class T> LINEA_HD T gelu_erf(T x) { return T(0.5) * x * (T(1) + erf(x * T(kInvSqrt2))); }

template <class T> LINEA_HD T gelu_erf_grad(T x) {
  return T(0.5) * (T(1) + erf(x * T(kInvSqrt2))) + x * T(kInvSqrt2Pi) * exp(T(-0.5) * x * x);
}

template <class T> LINEA_HD T elu(T x, T alpha) { return x > T(0) ? x : alpha * expm1(x); }
template <class T> LINEA_HD T elu_grad(T x, T alpha) { return x > T(0) ? T(1) : alpha * exp(x); }

template <class T> LINEA_HD T silu(T x) { return x * sigmoid(x); }

template <class T> LINEA_HD T sign(T x) { return T((x > T(0)) - (x < T(0))); }

// NaN-propagating max/min, as reductions and maximum() behave.
template <class T> LINEA_HD T max_nan(T a, T b) { return (a != a || a > b) ? a : (b != b ? b : (a > b ? a : b)); }
template <class T> LINEA_HD T min_nan(T a, T b) { return (a != a || a < b) ? a : (b != b ? b : (a < b ? a : b)); }

}  // namespace linea::scalar
