// Matrix products with batch broadcasting, on the backend's GEMM (OpenBLAS / cuBLAS).
#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

Shape with_matrix(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

// a (..., M, K) @ b (..., K, N), both at least 2-D.
Tensor matmul_2d_or_more(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  LINEA_CHECK(b.size(-2) == k, "matmul", "inner sizes differ: ", a.describe(), " @ ", b.describe());
  const Shape batch = broadcast_shapes(batch_of(a), batch_of(b), "matmul");
  Tensor y = empty(with_matrix(batch, m, n), a.dtype(), a.device());
  backend_for(a).matmul(broadcast_view(a, with_matrix(batch, m, k), "matmul"),
                        broadcast_view(b, with_matrix(batch, k, n), "matmul"), y);
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  // forward was y = a b, so: ga = gy b^T and gb = a^T gy, each summed over broadcast batch dims.
  return record("matmul", {a, b}, y, [as = SavedTensor(a), bs = SavedTensor(b), need_a, need_b](const Tensor& gy) -> Grads {
    const Tensor a = as.get(), b = bs.get();
    Tensor ga, gb;
    if (need_a) ga = sum_to(matmul(gy, transpose(b, -1, -2)), a.shape());
    if (need_b) {
      if (b.dim() == 2 && a.dim() > 2) {
        // A weight shared by the whole batch: one (K, rows) @ (rows, N) product, not a batch of
        // products summed afterwards. When b is the transpose of a contiguous matrix (Linear's
        // x @ t(W)), the product is formed transposed, (N, rows) @ (rows, K), so that W's gradient
        // arrives contiguous instead of as a transposed view to be copied.
        const Tensor a2 = reshape(a, {-1, a.size(-1)}), g2 = reshape(gy, {-1, gy.size(-1)});
        const bool transposed_weight = b.stride(0) == 1 && b.stride(1) == b.size(0) && b.size(0) > 1;
        gb = transposed_weight ? t(matmul(t(g2), a2)) : matmul(t(a2), g2);
      } else {
        gb = sum_to(matmul(transpose(a, -1, -2), gy), b.shape());
      }
    }
    return {ga, gb};
  });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_compatible(a, b, "matmul");
  LINEA_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul", "needs at least 1-D operands, got ", a.describe(), " @ ",
              b.describe());
  // Vectors as in NumPy: a (K) is a row (1, K), b (K) a column (K, 1); the added dim is removed.
  if (a.dim() == 1 && b.dim() == 1) return reshape(matmul_2d_or_more(unsqueeze(a, 0), unsqueeze(b, 1)), {});
  if (a.dim() == 1) return squeeze(matmul_2d_or_more(unsqueeze(a, 0), b), -2);
  if (b.dim() == 1) return squeeze(matmul_2d_or_more(a, unsqueeze(b, 1)), -1);
  return matmul_2d_or_more(a, b);
}

}  // namespace linea
