#pragma once
// bfloat16: the upper half of an IEEE float32 (1 sign bit, 8 exponent bits, 7 mantissa bits), so
// float32's range with 8 significant bits. linea stores it as its 16 bits and computes with it in
// float32: widening to float32 is exact, and every conversion into bfloat16 rounds to nearest,
// ties to even, as PyTorch and CUDA's __float2bfloat16 do. NaN stays NaN (quiet, sign kept);
// what rounds past the largest finite bfloat16 (about 3.39e38) becomes an infinity; float32
// subnormals round to bfloat16's subnormals (no flush to zero).
//
// The type converts implicitly both ways, so the kernels written once for every dtype (copy,
// fill, where, comparisons, gather) take it as they take float: `static_cast<T>(x)` rounds,
// `a < b` compares the widened values.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/host_device.h"

namespace linea {

namespace bf16_detail {

// The same bytes read as another type (std::bit_cast, which nvcc's device code lacks; memcpy of
// a register-sized value compiles to a plain move on both sides).
template <class To, class From>
LINEA_HD To same_bits(From x) {
  static_assert(sizeof(To) == sizeof(From));
  To y;
  memcpy(&y, &x, sizeof y);
  return y;
}
LINEA_HD uint32_t bits_of(float f) { return same_bits<uint32_t>(f); }
LINEA_HD float float_of(uint32_t u) { return same_bits<float>(u); }

// float32 -> bfloat16 bits, to nearest even: add just under half of the dropped part's unit, plus
// one when the kept part is odd, and truncate. A carry out of the mantissa bumps the exponent,
// which is what rounding up to the next binade (or to infinity) means.
LINEA_HD uint16_t round_float(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN: quiet
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// float64 -> bfloat16 bits. Rounding to float32 first and then to bfloat16 could round twice (a
// double just above a bfloat16 tie that becomes the tie in float32, then goes to even). So the
// float32 in between is rounded to odd: truncated toward zero, with its last bit set when that
// dropped anything. With 16 more bits than bfloat16 keeps, the second rounding then sees every
// tie as it was, and the result is the double's own rounding to nearest even.
LINEA_HD uint16_t round_double(double d) {
  if (d != d) return round_float(static_cast<float>(d));
  float f = static_cast<float>(d);                              // to nearest: may round away from zero
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = nextafterf(f, 0.0f);  // toward zero
  uint32_t u = bits_of(f);
  if (static_cast<double>(f) != d) u |= 1u;  // inexact: round to odd
  return round_float(float_of(u));
}

}  // namespace bf16_detail

struct bfloat16 {
  uint16_t bits;

  bfloat16() = default;
  LINEA_HD bfloat16(float f) : bits(bf16_detail::round_float(f)) {}
  LINEA_HD bfloat16(double d) : bits(bf16_detail::round_double(d)) {}
  // Integers through double: exact up to 2^53, far past where bfloat16 stops being exact (2^8).
  template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
  LINEA_HD bfloat16(I i) : bfloat16(static_cast<double>(i)) {}

  LINEA_HD operator float() const { return bf16_detail::float_of(static_cast<uint32_t>(bits) << 16); }

  LINEA_HD static bfloat16 from_bits(uint16_t b) {
    bfloat16 x;
    x.bits = b;
    return x;
  }
};

static_assert(sizeof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16>);

}  // namespace linea
