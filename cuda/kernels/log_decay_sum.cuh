#pragma once
// A cumulative log decay L (the sum of a chunk's log gates through a position, one channel) and the
// factors exp(L), exp(-L) taken from it, to the element type's precision.
//
// Rounding L to the element type alone would not do: at |L| = 60 a float's rounding of L is
// 4e-6, and so is the relative error it leaves in exp(L). So L is carried more precisely than the
// element type. A float64 scan sums in double. A float32 scan once did too (exp_to), but then
// every element cost conversions between double and float (one in the sum, three in each factor),
// which an SM runs at 16 a clock against 128 float additions: on an H200 the sums and factors took
// 7,400 of a ReGLA chunk_output block's 25,000 cycles, half of it what the conversions alone need
// at that rate. So a float32 scan carries L as an unevaluated pair of floats hi + lo, summed
// without error by Knuth's two-sum: to about 2^-46 of |L|, far below what the factors need
// (tests/cuda/log_decay_sum_test.cpp), and exp(L) = exp(hi) (1 + lo) with no conversion at all;
// ReGLA's gate ran 5-6% faster so (docs/benchmarks.md).
// Host code runs the same functions.

#include <cmath>

#include "tensor/host_device.h"

namespace linea::cuda::chunked {

template <class T>
struct LogDecaySum;

// float64: a double.
template <>
struct LogDecaySum<double> {
  double value = 0;
  LINEA_HD void add(double term) { value += term; }
  // a + b; a.plus(b) and b.plus(a) are the same to the last bit.
  LINEA_HD LogDecaySum plus(const LogDecaySum& b) const { return {value + b.value}; }
  LINEA_HD LogDecaySum minus(const LogDecaySum& b) const { return {value - b.value}; }
  LINEA_HD double as_double() const { return value; }
  LINEA_HD double exp_up() const { return exp(value); }  // exp(L)
  LINEA_HD void exp_both(double& up, double& down) const { up = exp_up(), down = exp(-value); }
};

// float32: hi + lo, |lo| at most half an ulp of hi after plus and minus (between them, add leaves
// the rounding errors of a segment's additions in lo, a few ulps of hi).
template <>
struct LogDecaySum<float> {
  float hi = 0, lo = 0;
  // s + e = a + b exactly, s the rounded sum (Knuth's two-sum: no condition on a and b).
  static LINEA_HD void two_sum(float a, float b, float& s, float& e) {
    s = a + b;
    const float bb = s - a;
    e = (a - (s - bb)) + (b - bb);
  }
  LINEA_HD void add(float term) {
    float e;
    two_sum(hi, term, hi, e);
    lo += e;
  }
  LINEA_HD LogDecaySum plus(const LogDecaySum& b) const {
    float s, e;
    two_sum(hi, b.hi, s, e);
    return normalized(s, (lo + b.lo) + e);
  }
  LINEA_HD LogDecaySum minus(const LogDecaySum& b) const { return plus({-b.hi, -b.lo}); }
  LINEA_HD double as_double() const { return static_cast<double>(hi) + static_cast<double>(lo); }
  // exp(hi + lo) = exp(hi) exp(lo), and exp(lo) = 1 + lo to float rounding (|lo| < 4e-6).
  LINEA_HD float exp_up() const { return expf(hi) * (1.0f + lo); }
  LINEA_HD void exp_both(float& up, float& down) const {
    up = exp_up();
    down = expf(-hi) * (1.0f - lo);
  }

 private:
  // hi + lo as the pair of the rounded sum and its error: Dekker's fast two-sum, exact when |hi| is
  // at least |lo|; otherwise (hi cancelled, as in minus of two near sums) off by an ulp of lo, far
  // below what exp needs.
  static LINEA_HD LogDecaySum normalized(float hi, float lo) {
    const float s = hi + lo;
    return {s, lo - (s - hi)};
  }
};

// From each segment's own sum (parts[q * stride], q < count), the sums of the segments before
// `segment` and of all of them: in order of the segments and with the same additions, so that the
// last segment's last L (its own sum plus before: plus is symmetric) is total to the last bit.
template <class T>
LINEA_HD void combine_segments(const LogDecaySum<T>* parts, int stride, int count, int segment, LogDecaySum<T>& before,
                               LogDecaySum<T>& total) {
  before = total = LogDecaySum<T>{};
  for (int q = 0; q < count; ++q) {
    const LogDecaySum<T> part = parts[q * stride];
    if (q < segment) before = before.plus(part);
    total = total.plus(part);
  }
}

}  // namespace linea::cuda::chunked
