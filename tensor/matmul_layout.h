#pragma once
// How a BLAS reads the matrices of a batched matmul in place: shared by the CPU (OpenBLAS) and
// CUDA (cuBLAS) matmul kernels, so both take the same decisions. A stored transpose becomes a
// transpose flag instead of a copy, and when b is shared across the batch (a Linear layer's
// weight) the batch folds into the rows of one large GEMM.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "tensor/backend.h"
#include "tensor/tensor.h"

namespace linea::matmul_layout {

// How a GEMM reads a row-major (rows, cols) matrix with the given strides, without copying.
struct Operand {
  bool ok = false;          // false: the layout needs a contiguous copy first
  bool transposed = false;  // stored column-major: pass it with a transpose flag
  int64_t ld = 1;           // the leading dimension to pass
};

inline Operand operand(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if (col_stride == 1 && row_stride >= std::max<int64_t>(1, cols)) return {true, false, row_stride};
  if (row_stride == 1 && col_stride >= std::max<int64_t>(1, rows)) return {true, true, col_stride};
  if (rows <= 1 && col_stride == 1) return {true, false, std::max<int64_t>(1, cols)};
  if (cols <= 1 && row_stride == 1) return {true, true, std::max<int64_t>(1, rows)};
  return {};
}

// The layout of the last two dims of t.
inline Operand operand_of(const Tensor& t) {
  const int64_t n = t.dim();
  return operand(t.size(n - 2), t.size(n - 1), t.stride(n - 2), t.stride(n - 1));
}

// The stride between consecutive rows when a's batch dims and rows collapse into one dim (so a
// batch of (M, K) matrices is one (batch*M, K) matrix), or 0 when they do not. Size-1 dims take
// no steps, so their strides say nothing; the row stride comes from the innermost dim that has
// more than one element (a batch dim when M = 1), and a broadcast (stride-0) dim never collapses.
inline int64_t collapsed_row_stride(const Tensor& a) {
  const int64_t n = a.dim();
  if (a.stride(n - 1) != 1) return 0;
  int64_t row_stride = -1, expected = 0;
  for (int64_t d = n - 2; d >= 0; --d) {
    if (a.size(d) == 1) continue;
    if (row_stride < 0) {
      row_stride = expected = a.stride(d);
    } else if (a.stride(d) != expected) {
      return 0;
    }
    expected *= a.size(d);
  }
  return row_stride >= std::max<int64_t>(1, a.size(n - 1)) ? row_stride : 0;
}

// True when b is the same matrix for every batch element (its batch dims broadcast or size 1).
inline bool shared_across_batch(const Tensor& b) {
  for (int64_t d = 0; d < b.dim() - 2; ++d)
    if (b.stride(d) != 0 && b.size(d) != 1) return false;
  return true;
}

// What both backends' matmul kernels start from: out = a @ b with a (..., m, k), b (..., k, n) and
// out (..., m, n) holding `batch` matrices; the operands in layouts a GEMM reads in place and how
// it reads them.
struct Plan {
  int64_t m, n, k, batch;
  Tensor a, b;
  Operand la, lb;
};

// contiguous_copy: the backend's own, for an operand no GEMM can read in place. nullopt when no
// GEMM is needed: out is empty, or k = 0, where the product is a sum of nothing: `backend` fills
// out with zeros, or leaves it as it is when the product is to be added to it (accumulate).
inline std::optional<Plan> plan(const Backend& backend, const Tensor& a, const Tensor& b, const Tensor& out,
                                Tensor (*contiguous_copy)(const Tensor&), bool accumulate) {
  const int64_t nd = out.dim();
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1), k = a.size(nd - 1);
  if (out.numel() == 0) return std::nullopt;
  if (k == 0) {
    if (!accumulate) backend.fill(out, 0.0);
    return std::nullopt;
  }
  const auto readable = [&](const Tensor& t) { return operand_of(t).ok ? t : contiguous_copy(t); };
  Plan p{m, n, k, out.numel() / (m * n), readable(a), readable(b), {}, {}};
  p.la = operand_of(p.a);
  p.lb = operand_of(p.b);
  return p;
}

}  // namespace linea::matmul_layout
