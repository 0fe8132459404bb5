// Batched matmul on OpenBLAS. A stored transpose is passed to gemm as a transpose flag instead of
// being copied, and when b is shared across the batch (a Linear layer's weight) the batch folds
// into the rows of one large gemm.
#include "cpu/cpu_backend.h"
#include "cpu/gemm.h"
#include "tensor/matmul_layout.h"
#include "tensor/widen.h"

namespace linea::cpu {

namespace {

CBLAS_TRANSPOSE flag(const matmul_layout::Operand& op) { return op.transposed ? CblasTrans : CblasNoTrans; }

}  // namespace

void CpuBackend::matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out, bool accumulate) const {
  if (a_in.dtype() == kBFloat16) {  // the reference: float32 products (rounded once for a bfloat16 out)
    const Tensor result = accumulate && out.dtype() == kBFloat16 ? widened(*this, out) : float32_result(out);
    matmul(widened(*this, a_in), widened(*this, b_in), result, accumulate);
    narrow_into(*this, result, out);
    return;
  }
  const std::optional<matmul_layout::Plan> plan = matmul_layout::plan(*this, a_in, b_in, out, contiguous_copy, accumulate);
  if (!plan) return;
  const auto& [m, n, k, batch, a, b, la, lb] = *plan;
  const int64_t nd = out.dim();

  dispatch_floating(out.dtype(), "matmul", [&]<class T>() {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.data<T>();
    const int64_t row_stride =
        batch > 1 && matmul_layout::shared_across_batch(b) ? matmul_layout::collapsed_row_stride(a) : 0;
    if (row_stride > 0) {
      gemm<T>(CblasNoTrans, flag(lb), batch * m, n, k, pa, row_stride, pb, lb.ld, pc, n, accumulate);
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
      gemm<T>(flag(la), flag(lb), m, n, k, pa + offset_a, la.ld, pb + offset_b, lb.ld, pc + i * m * n, n, accumulate);
    }
  });
}

}  // namespace linea::cpu
