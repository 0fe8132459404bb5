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

// t as a bfloat16 tensor outside the graph (t itself when it already is). A transposed contiguous
// matrix (Linear's t(W)) keeps that layout, so the product still reads it as a transpose flag.
Tensor as_bfloat16(const Tensor& t) {
  if (t.dtype() == kBFloat16) return t;
  const bool transposed_matrix = t.dim() == 2 && t.stride(0) == 1 && t.stride(1) == t.size(0) && t.size(0) > 1;
  const Tensor source = transposed_matrix ? transpose(t, 0, 1) : t;
  Tensor out = empty(source.shape(), kBFloat16, source.device());
  backend_for(source).copy(source, out);
  return transposed_matrix ? transpose(out, 0, 1) : out;
}

// a (..., M, K) @ b (..., K, N), both at least 2-D. bf16: the operands rounded to bfloat16 and
// the result in out_dtype (matmul_bf16); its gradients are products of the same kind, each in its
// operand's dtype.
Tensor matmul_2d_or_more(const Tensor& a, const Tensor& b, bool bf16, DType out_dtype) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const char* op = bf16 ? "matmul_bf16" : "matmul";
  LINEA_CHECK(b.size(-2) == k, op, "inner sizes differ: ", a.describe(), " @ ", b.describe());
  const Shape batch = broadcast_shapes(batch_of(a), batch_of(b), op);
  const Tensor a_op = bf16 ? as_bfloat16(a) : a, b_op = bf16 ? as_bfloat16(b) : b;
  Tensor y = empty(with_matrix(batch, m, n), bf16 ? out_dtype : a.dtype(), a.device());
  backend_for(a).matmul(broadcast_view(a_op, with_matrix(batch, m, k), op),
                        broadcast_view(b_op, with_matrix(batch, k, n), op), y, /*accumulate=*/false);
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  // A gradient's product, in the dtype of the operand it belongs to.
  const auto product = [bf16](const Tensor& x, const Tensor& y, DType into) {
    return bf16 ? matmul_bf16(x, y, into) : matmul(x, y);
  };
  // forward was y = a b, so: ga = gy b^T and gb = a^T gy, each summed over broadcast batch dims.
  // (The bf16 product saves the rounded operands: half the bytes, and the backward's rounding of
  // them is then no work. gy is rounded once, for both products.)
  return record(op, {a, b}, y, [as = SavedTensor(a_op), bs = SavedTensor(b_op), need_a, need_b, product, bf16,
                                a_shape = a.shape(), b_shape = b.shape(), a_dtype = a.dtype(),
                                b_dtype = b.dtype()](const Tensor& gy_) -> Grads {
    const Tensor a = as.get(), b = bs.get();
    const Tensor gy = bf16 && need_a && need_b ? as_bfloat16(gy_) : gy_;
    Tensor ga, gb;
    if (need_a) ga = sum_to(product(gy, transpose(b, -1, -2), a_dtype), a_shape);
    if (need_b) {
      if (b.dim() == 2 && a.dim() > 2) {
        // A weight shared by the whole batch: one (K, rows) @ (rows, N) product, not a batch of
        // products summed afterwards. When b is the transpose of a contiguous matrix (Linear's
        // x @ t(W)), the product is formed transposed, (N, rows) @ (rows, K), so that W's gradient
        // arrives contiguous instead of as a transposed view to be copied.
        const Tensor a2 = reshape(a, {-1, a.size(-1)}), g2 = reshape(gy, {-1, gy.size(-1)});
        const bool transposed_weight = b.stride(0) == 1 && b.stride(1) == b.size(0) && b.size(0) > 1;
        gb = transposed_weight ? t(product(t(g2), a2, b_dtype)) : product(t(a2), g2, b_dtype);
      } else {
        gb = sum_to(product(transpose(a, -1, -2), gy, b_dtype), b_shape);
      }
    }
    return {ga, gb};
  });
}

// Vectors as in NumPy: a (K) is a row (1, K), b (K) a column (K, 1); the added dim is removed.
Tensor matmul_any(const Tensor& a, const Tensor& b, bool bf16, DType out_dtype = kFloat32) {
  const char* op = bf16 ? "matmul_bf16" : "matmul";
  if (bf16) {  // float32 and bfloat16 mix here (a backward's float32 gradient with a saved operand)
    check_defined(a, op);
    check_defined(b, op);
    LINEA_CHECK(a.device() == b.device(), op, "tensors are on different devices: ", a.describe(), " and ", b.describe());
  } else {
    check_compatible(a, b, op);
  }
  LINEA_CHECK(a.dim() >= 1 && b.dim() >= 1, op, "needs at least 1-D operands, got ", a.describe(), " @ ",
              b.describe());
  if (a.dim() == 1 && b.dim() == 1)
    return reshape(matmul_2d_or_more(unsqueeze(a, 0), unsqueeze(b, 1), bf16, out_dtype), {});
  if (a.dim() == 1) return squeeze(matmul_2d_or_more(unsqueeze(a, 0), b, bf16, out_dtype), -2);
  if (b.dim() == 1) return squeeze(matmul_2d_or_more(a, unsqueeze(b, 1), bf16, out_dtype), -1);
  return matmul_2d_or_more(a, b, bf16, out_dtype);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) { return matmul_any(a, b, false); }

Tensor& matmul_add_(Tensor& out, const Tensor& a, const Tensor& b) {
  const char* op = "matmul_add_";
  check_defined(out, op);
  check_floating(out, op);
  check_compatible(out, a, op);
  check_compatible(out, b, op);
  LINEA_CHECK(!autograd::needs_grad({out, a, b}), op, "records no gradient, but grad mode is on and ",
              out.requires_grad() ? out.describe() : a.requires_grad() ? a.describe() : b.describe(),
              " requires grad (use out + matmul(a, b))");
  LINEA_CHECK(a.dim() >= 2 && b.dim() >= 2, op, "needs operands of at least 2 dims, got ", a.describe(), " @ ",
              b.describe());
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  LINEA_CHECK(b.size(-2) == k, op, "inner sizes differ: ", a.describe(), " @ ", b.describe());
  const Shape batch = broadcast_shapes(batch_of(a), batch_of(b), op);
  LINEA_CHECK(out.shape() == with_matrix(batch, m, n), op, "out must have the product's shape ",
              shape_str(with_matrix(batch, m, n)), ", got ", out.describe());
  LINEA_CHECK(out.is_contiguous(), op, "out must be contiguous (the GEMM adds into it in place), got ",
              out.describe());
  LINEA_CHECK(out.storage() != a.storage() && out.storage() != b.storage(), op,
              "out shares memory with an operand, which the GEMM would overwrite as it reads it");
  backend_for(out).matmul(broadcast_view(a, with_matrix(batch, m, k), op),
                          broadcast_view(b, with_matrix(batch, k, n), op), out, /*accumulate=*/true);
  out.bump_version();
  return out;
}

Tensor matmul_bf16(const Tensor& a, const Tensor& b, DType out) {
  LINEA_CHECK((a.dtype() == kFloat32 || a.dtype() == kBFloat16) && (b.dtype() == kFloat32 || b.dtype() == kBFloat16),
              "matmul_bf16", "takes float32 or bfloat16 operands, got ", a.describe(), " @ ", b.describe());
  LINEA_CHECK(out == kFloat32 || out == kBFloat16, "matmul_bf16", "writes float32 or bfloat16, not ", dtype_name(out));
  return matmul_any(a, b, true, out);
}

}  // namespace linea
