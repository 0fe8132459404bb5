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

// One step of a running max that remembers WHERE its value came from (normalized_exp): `later`
// takes over from `earlier` only when strictly greater, so ties keep the earlier position; a NaN
// takes over from a number and is then kept (the max of anything with a NaN is NaN, as in
// max_nan).
template <class T> LINEA_HD bool takes_over(T later, T earlier) {
  return later > earlier || (later != later && earlier == earlier);
}

// a and b are the same value, NaN included: how a max's position is found again from its value.
template <class T> LINEA_HD bool same_value(T a, T b) { return a == b || (a != a && b != b); }

constexpr double kLn2 = 0.69314718055994530941723;

// ReGLA's refined gate f = g (g + 2 r (1 - g)), g = sigmoid(a), r = sigmoid(c), in log space:
//   log f = log g + log u,   log u = logaddexp(log g, ln 2 + log r + log(1 - g)),
// every term a log-sigmoid, so it is finite for any finite a and c (the direct product underflows
// to log 0 once g is tiny), in the order nn/linear/gates.cpp's composite adds them. With
// w1 = g / u and w2 = 2 r (1 - g) / u = 1 - w1, the weights of log u's two terms, the
// derivatives of u = g + 2 r (1 - g) (du/da = g (1 - g)(1 - 2 r), du/dc = 2 (1 - g) r (1 - r))
// become
//   d log f / da = (1 - g) + g (1 - g)(1 - 2 r) / u = (1 - g)(1 + (1 - 2 r) w1)
//   d log f / dc = 2 (1 - g) r (1 - r) / u        = w2 (1 - r),
// products of numbers in [0, 2]: no division by a u that underflows.
template <class T> struct RefinedLogGate {
  T value, d_a, d_c;
};
template <class T> LINEA_HD RefinedLogGate<T> refined_log_gate(T a, T c) {
  const T first = log_sigmoid(a), second = (log_sigmoid(c) + T(kLn2)) + log_sigmoid(-a);
  const T shift = first > second ? first : second;
  const T e1 = exp(first - shift), e2 = exp(second - shift), total = e1 + e2;  // total in [1, 2]
  const T r = sigmoid(c), one_minus_r = sigmoid(-c);
  return {first + (shift + log(total)), sigmoid(-a) * (T(1) + (one_minus_r - r) * (e1 / total)),
          (e2 / total) * one_minus_r};
}

}  // namespace linea::scalar
