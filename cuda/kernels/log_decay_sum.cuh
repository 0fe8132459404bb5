#pragma once
// A cumulative log decay L (the sum of a chunk's log gates through a position, one channel) and the
// factors exp(L), exp(-L) taken from it, to the element type's precision.
//
// Rounding L to the element type alone would not do: at |L| = 60 a float's rounding of L is
// 4e-6, and so is the relative error it leaves in exp(L). So L is carried more precisely than the
// element type. A float64 scan sums in double. A float32 scan once did too (exp_to), but then
// every element cost conversions between double and float (one in the sum, three in each factor),
// and an SM runs those at 16 a clock against 128 float additions: on an H200 they bound the time of
// a chunk's factors (docs/benchmarks.md). So a float32 scan carries L as an unevaluated pair of
// floats hi + lo, summed without error by Knuth's two-sum: about 48 bits, as exact as the double
// for sums of 64 terms, and exp(L) = exp(hi) (1 + lo) with no conversion at all.

#include <cmath>

namespace linea::cuda::chunked {

template <class T>
struct LogDecaySum;

// float64: a double.
template <>
struct LogDecaySum<double> {
  double value = 0;
  __device__ __forceinline__ void add(double term) { value += term; }
  // a + b; a.plus(b) and b.plus(a) are the same to the last bit.
  __device__ __forceinline__ LogDecaySum plus(const LogDecaySum& b) const { return {value + b.value}; }
  __device__ __forceinline__ LogDecaySum minus(const LogDecaySum& b) const { return {value - b.value}; }
  __device__ __forceinline__ double as_double() const { return value; }
  __device__ __forceinline__ double exp_up() const { return exp(value); }  // exp(L)
  __device__ __forceinline__ void exp_both(double& up, double& down) const { up = exp(value), down = exp(-value); }
};

// float32: hi + lo, |lo| at most half an ulp of hi after plus and minus (between them, add leaves
// the rounding errors of a segment's additions in lo, a few ulps of hi).
template <>
struct LogDecaySum<float> {
  float hi = 0, lo = 0;
  // s + e = a + b exactly, s the rounded sum (Knuth's two-sum: no condition on a and b).
  __device__ static __forceinline__ void two_sum(float a, float b, float& s, float& e) {
    s = a + b;
    const float bb = s - a;
    e = (a - (s - bb)) + (b - bb);
  }
  __device__ __forceinline__ void add(float term) {
    float e;
    two_sum(hi, term, hi, e);
    lo += e;
  }
  __device__ __forceinline__ LogDecaySum plus(const LogDecaySum& b) const {
    float s, e;
    two_sum(hi, b.hi, s, e);
    return normalized(s, (lo + b.lo) + e);
  }
  __device__ __forceinline__ LogDecaySum minus(const LogDecaySum& b) const { return plus({-b.hi, -b.lo}); }
  __device__ __forceinline__ double as_double() const { return static_cast<double>(hi) + static_cast<double>(lo); }
  // exp(hi + lo) = exp(hi) exp(lo), and exp(lo) = 1 + lo to float rounding (|lo| < 4e-6).
  __device__ __forceinline__ float exp_up() const { return expf(hi) * (1.0f + lo); }
  __device__ __forceinline__ void exp_both(float& up, float& down) const {
    up = expf(hi) * (1.0f + lo);
    down = expf(-hi) * (1.0f - lo);
  }

 private:
  // hi + lo as the pair of the rounded sum and its error: Dekker's fast two-sum, exact when |hi| is
  // at least |lo|; otherwise (hi cancelled, as in minus of two near sums) off by an ulp of lo, far
  // below what exp needs.
  __device__ static __forceinline__ LogDecaySum normalized(float hi, float lo) {
    const float s = hi + lo;
    return {s, lo - (s - hi)};
  }
};

}  // namespace linea::cuda::chunked
