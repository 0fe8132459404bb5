// Batched matmul on OpenBLAS. A stored transpose is passed to gemm as a transpose flag instead of
// being copied, and when b is shared across the batch (a Linear layer's weight) the batch folds
// into the rows of one large gemm.
#include <cblas.h>

#include "tensor/cpu/cpu_backend.h"

namespace linea::cpu {

namespace {

// How gemm reads a (rows, cols) matrix with the given strides, without copying.
struct GemmOperand {
  bool ok = false;             // false: the layout needs a contiguous copy first
  CBLAS_TRANSPOSE trans = CblasNoTrans;
  int64_t ld = 1;
};

GemmOperand gemm_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if (col_stride == 1 && row_stride >= std::max<int64_t>(1, cols)) return {true, CblasNoTrans, row_stride};
  if (row_stride == 1 && col_stride >= std::max<int64_t>(1, rows)) return {true, CblasTrans, col_stride};
  if (rows <= 1 && col_stride == 1) return {true, CblasNoTrans, std::max<int64_t>(1, cols)};
  if (cols <= 1 && row_stride == 1) return {true, CblasTrans, std::max<int64_t>(1, rows)};
  return {};
}

template <class T>
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const T* a,
          int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

// A view of the same data whose last two dims gemm can read; copies only when it must.
Tensor gemm_readable(const Tensor& t) {
  const int64_t n = t.dim();
  return gemm_layout(t.size(n - 2), t.size(n - 1), t.stride(n - 2), t.stride(n - 1)).ok ? t : contiguous_copy(t);
}

// The stride between consecutive rows when a's batch dims and rows collapse into one dim (so a
// batch of (M, K) matrices is one (batch*M, K) matrix), or 0 when they do not. Size-1 dims take
// no steps, so their strides say nothing; the row stride comes from the innermost dim that has
// more than one element (a batch dim when M = 1), and a broadcast (stride-0) dim never collapses.
int64_t collapsed_row_stride(const Tensor& a) {
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

}  // namespace

void CpuBackend::matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out) const {
  const int64_t nd = out.dim();
  const int64_t m = out.size(nd - 2), n = out.size(nd - 1), k = a_in.size(nd - 1);
  if (out.numel() == 0) return;
  if (k == 0) {
    fill(out, 0.0);
    return;
  }
  const Tensor a = gemm_readable(a_in), b = gemm_readable(b_in);
  const GemmOperand la = gemm_layout(m, k, a.stride(nd - 2), a.stride(nd - 1));
  const GemmOperand lb = gemm_layout(k, n, b.stride(nd - 2), b.stride(nd - 1));
  const int64_t batch = out.numel() / (m * n);

  dispatch_floating(out.dtype(), "matmul", [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.data<T>();
    bool b_shared = true;
    for (int64_t d = 0; d < nd - 2; ++d) b_shared &= b.stride(d) == 0 || b.size(d) == 1;
    const int64_t row_stride = batch > 1 && b_shared ? collapsed_row_stride(a) : 0;
    if (row_stride > 0) {
      gemm<T>(CblasNoTrans, lb.trans, batch * m, n, k, pa, row_stride, pb, lb.ld, pc, n);
      return;
    }
    for (int64_t i = 0; i < batch; ++i) {
      int64_t rest = i, offset_a = 0, offset_b = 0;
      for (int64_t d = nd - 2; d-- > 0;) {
        const int64_t idx = rest % out.size(d);
        rest /= out.size(d);
        offset_a += idx * a.stride(d);
        offset_b += idx * b.stride(d);
      }
      gemm<T>(la.trans, lb.trans, m, n, k, pa + offset_a, la.ld, pb + offset_b, lb.ld, pc + i * m * n, n);
    }
  });
}

}  // namespace linea::cpu
