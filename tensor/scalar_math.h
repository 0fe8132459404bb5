#pragma once
// The scalar formula of every elementwise op, written once for the CPU and CUDA kernels.
#include <cmath>
#include <cstdint>

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

// The largest of x[0..n), n >= 1, by takes_over (NaN if there is one).
template <class T> LINEA_HD T max_of(const T* x, int64_t n) {
  T best = x[0];
  for (int64_t c = 1; c < n; ++c)
    if (takes_over(x[c], best)) best = x[c];
  return best;
}

// a and b are the same value, NaN included: how a max's position is found again from its value.
template <class T> LINEA_HD bool same_value(T a, T b) { return a == b || (a != a && b != b); }

constexpr double kLn2 = 0.69314718055994530941723;

// ReGLA's refined gate f = g (g + 2 r (1 - g)), g = sigmoid(a), r = sigmoid(c), in log space:
//   log f = log g + log u,   log u = logaddexp(log g, ln 2 + log r + log(1 - g)),
// every term a log-sigmoid, so it is finite for any finite a and c (the direct product underflows
// to log 0 once g is tiny), in the order nn/linear_attention/gates.cpp's composite adds them. With
// w1 = g / u and w2 = 2 r (1 - g) / u = 1 - w1, the weights of log u's two terms, the
// derivatives of u = g + 2 r (1 - g) (du/da = g (1 - g)(1 - 2 r), du/dc = 2 (1 - g) r (1 - r))
// become
//   d log f / da = (1 - g) + g (1 - g)(1 - 2 r) / u = (1 - g)(1 + (1 - 2 r) w1)
//   d log f / dc = 2 (1 - g) r (1 - r) / u        = w2 (1 - r),
// products of numbers in [0, 2]: no division by a u that underflows.
//
// The GPU kernels are bound by this math, so each element takes three exp and three log1p (and
// three divisions for the derivatives), not a call per term: one exp and one log1p give all four
// sigmoid terms of x (a, then c),
//   e = exp(-|x|),  log sigmoid(x) = min(x, 0) - log1p(e),  log sigmoid(-x) = min(-x, 0) - log1p(e),
//   sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) below, sigmoid(-x) the other one
// (so 1 - g and 1 - r never come from a subtraction that cancels), and one more pair gives log u
// and both weights: with E = exp(-|first - second|) <= 1,
//   logaddexp(first, second) = max + log1p(E),  weights 1 / (1 + E) (the larger term's), E / (1 + E).
// E can't come from the first two exps as a product (e^a (1 + e^-c) / 2 and its inverse): once
// |a| or |c| passes about 40 in float32 such products leave the normal range while E need not.
template <class T> struct RefinedLogGate {
  T value, d_a, d_c;
};

// log sigmoid(x), log sigmoid(-x), sigmoid(x), sigmoid(-x) from one exp and one log1p (above).
template <class T> struct SigmoidTerms {
  T log_p, log_n, p, n;
};
template <class T> LINEA_HD SigmoidTerms<T> sigmoid_terms(T x) {
  const T e = exp(x > T(0) ? -x : x);  // written so that a NaN x stays NaN
  const T log1p_e = log1p(e), inv = T(1) / (T(1) + e);
  const bool up = x >= T(0);
  return {(up ? T(0) : x) - log1p_e, (up ? -x : T(0)) - log1p_e, up ? inv : e * inv, up ? e * inv : inv};
}

template <class T> LINEA_HD RefinedLogGate<T> refined_log_gate(T a, T c) {
  const SigmoidTerms<T> g = sigmoid_terms(a), r = sigmoid_terms(c);
  const T first = g.log_p, second = (r.log_p + T(kLn2)) + g.log_n;
  const bool first_larger = first > second;
  const T shift = first_larger ? first : second;
  const T E = exp(first_larger ? second - first : first - second);  // a NaN operand makes it NaN
  const T inv = T(1) / (T(1) + E);
  const T w1 = first_larger ? inv : E * inv, w2 = first_larger ? E * inv : inv;
  return {first + (shift + log1p(E)), g.n * (T(1) + (r.n - r.p) * w1), w2 * r.n};
}

}  // namespace linea::scalar
