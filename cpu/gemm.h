#pragma once
// One row-major OpenBLAS gemm for float or double: c = op(a) op(b), (m, k) x (k, n) -> (m, n), or
// c += op(a) op(b) when accumulate.
#include <cblas.h>

#include <cstdint>
#include <type_traits>

namespace linea::cpu {

template <class T>
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T* c, int64_t ldc, bool accumulate = false) {
  const T beta = accumulate ? T(1) : T(0);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace linea::cpu
