#pragma once
// Element types. Float64 exists so gradients can be checked numerically to 1e-8; Int64 holds
// indices (embedding ids, targets, gather positions); Bool holds masks (where, masked_fill, tril).
// BFloat16 (tensor/bfloat16.h) is the half-size float of mixed precision: it is stored, converted,
// copied, compared, gathered, printed, saved, reduced, multiplied (matmul) and taken by the
// elementwise math (unary, binary, their derivatives), softmax, cross-entropy, the norms, the
// rotary embedding and attention, each element computed in float32 and rounded once; the other
// math kernels take float32 and float64 and name bfloat16 in their error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/bfloat16.h"
#include "tensor/error.h"

namespace linea {

enum class DType : uint8_t { Float32, Float64, Int64, Bool, BFloat16 };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;
inline constexpr DType kBFloat16 = DType::BFloat16;

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
    case DType::BFloat16: return 2;
  }
  return 0;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::BFloat16: return "bfloat16";
  }
  return "?";
}

inline bool is_floating(DType t) { return t == DType::Float32 || t == DType::Float64 || t == DType::BFloat16; }

// The C++ type behind a dtype, and back.
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::BFloat16; };

// Calls fn.template operator()<T>() with T the C++ type of a floating dtype; any other dtype is an
// error naming the op. Kernels are written once as templates and instantiated through this.
template <class Fn>
decltype(auto) dispatch_floating(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    case DType::BFloat16:
      fail(op, "has no bfloat16 kernel: it takes float32 or float64 (convert with .to(kFloat32))");
    default: fail(op, "expected a floating dtype (float32 or float64), got ", dtype_name(t));
  }
}

// The type a kernel computes an element of T in: float for bfloat16 (widened exactly, the result
// rounded once when stored), T itself otherwise.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;

// dispatch_floating for the kernels that also take bfloat16, computing in compute_t<T>.
template <class Fn>
decltype(auto) dispatch_floating_or_bf16(DType t, const char* op, Fn&& fn) {
  if (t == DType::BFloat16) return fn.template operator()<bfloat16>();
  return dispatch_floating(t, op, fn);
}

// The dtype such a kernel computes in, keeps statistics in and takes parameters in for activations
// of dtype t: float32 for bfloat16, t itself otherwise (compute_t's dtype).
inline DType compute_dtype(DType t) { return t == DType::BFloat16 ? DType::Float32 : t; }

// For kernels that read activations of one dtype and write another: fn.template operator()<In,
// Out>() for in == out (float32, float64 or bfloat16), or float32 in and bfloat16 out (a norm that
// hands a float32 residual stream to bfloat16 products writes bfloat16 directly).
template <class Fn>
decltype(auto) dispatch_in_out(DType in, DType out, const char* op, Fn&& fn) {
  if (in == DType::Float32 && out == DType::BFloat16) return fn.template operator()<float, bfloat16>();
  if (in != out)
    fail(op, "reads ", dtype_name(in), " and writes ", dtype_name(out),
         ": it writes its input's dtype, or bfloat16 from float32");
  return dispatch_floating_or_bf16(in, op, [&]<class T>() -> decltype(auto) { return fn.template operator()<T, T>(); });
}

// Like dispatch_floating, for ops defined on every dtype (copy, fill, where, comparisons, gather).
template <class Fn>
decltype(auto) dispatch_all(DType t, Fn&& fn) {
  switch (t) {
    case DType::Float32: return fn.template operator()<float>();
    case DType::Float64: return fn.template operator()<double>();
    case DType::Int64: return fn.template operator()<int64_t>();
    case DType::Bool: return fn.template operator()<bool>();
    case DType::BFloat16: return fn.template operator()<bfloat16>();
  }
  fail("dispatch", "unknown dtype");
}

}  // namespace linea
