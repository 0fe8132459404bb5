#pragma once
// The scalar formulas of fused_linear (backend_kernels.def), written once for the CPU and the CUDA
// kernels: the activations it may apply, and the input norm, computed in double from the row's
// statistics as the norm kernels (cpu/norm.cpp) compute them.
#include <cmath>

#include "tensor/backend.h"
#include "tensor/scalar_math.h"

namespace linea {

// Whether fused_linear takes `op` as its activation.
inline bool is_fusable_activation(UnaryOp op) {
  return op == UnaryOp::Relu || op == UnaryOp::GeluTanh || op == UnaryOp::GeluErf || op == UnaryOp::Silu;
}

template <class T>
LINEA_HD T activation_value(UnaryOp op, T x) {
  switch (op) {
    case UnaryOp::Relu: return x > T(0) ? x : T(0);
    case UnaryOp::GeluTanh: return scalar::gelu_tanh(x);
    case UnaryOp::GeluErf: return scalar::gelu_erf(x);
    default: return scalar::silu(x);  // Silu: is_fusable_activation admits nothing else
  }
}

// 1 / sqrt(the mean square over `width` values + eps), from their sum of squares.
LINEA_HD double norm_rstd(double sum_squares, double width, double eps) { return 1.0 / std::sqrt(sum_squares / width + eps); }

// One element of the normed row: (x - mean) rstd gain + shift, with the gain and shift as values
// (mean 0 and no shift for RMS; without a gain, gain = 1 gives the same bits). `shifted`: whether
// there is a shift (adding 0 would turn a -0 into +0).
template <class T>
LINEA_HD T normed_value(T x, double mean, double rstd, T gain, T shift, bool shifted) {
  double v = (x - mean) * rstd;
  v *= gain;
  if (shifted) v += shift;
  return static_cast<T>(v);
}

// The same with the gain and shift read from rows (a null gain is 1, a null shift 0).
template <class T>
LINEA_HD T normed_value(T x, double mean, double rstd, const T* gain, const T* shift, int64_t c) {
  return normed_value(x, mean, rstd, gain ? gain[c] : T(1), shift ? shift[c] : T(0), shift != nullptr);
}

}  // namespace linea
