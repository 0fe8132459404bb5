// matmul_add_ (autograd/ops.h): out += a @ b in one GEMM, the residual addition a prefill folds
// into its products (nn/layers/fused_product.h: add_product_into). Against out + matmul(a, b) on
// fresh random values, in float64 and float32: a plain product, a Linear's x @ t(W) with the
// batch folded into the rows, batched and broadcast operands, K = 0 (out unchanged); then the
// version bump and the named errors.
#include <tuple>
#include <vector>

#include "autograd/ops.h"
#include "tests/test_util.h"

namespace linea::testing {
namespace {

struct Shapes {
  Shape a, b;
  bool b_transposed;  // b given as t(B) of a contiguous (n, k) B: a Linear's weight
};

// The product's shape, that out takes.
Shape product_shape(const Tensor& a, const Tensor& b) { return matmul(a, b).shape(); }

TEST(MatmulAdd, AddsTheProductToOut) {
  const std::vector<Shapes> cases = {
      {{37, 129}, {129, 65}, false},      // plain, awkward sizes
      {{2, 5, 7}, {6, 7}, true},          // x @ t(W): the batch folds into one GEMM's rows
      {{1, 1, 16}, {16, 16}, true},       // one row (a prompt's last token)
      {{2, 3, 5, 7}, {2, 3, 7, 4}, false},  // batched
      {{2, 1, 5, 7}, {1, 3, 7, 4}, false},  // broadcast batch dims
  };
  Generator gen(31);
  for (DType dtype : {kFloat64, kFloat32}) {
    for (const Shapes& s : cases) {
      const Tensor a = randn(s.a, dtype, &gen);
      const Tensor b = s.b_transposed ? t(randn(s.b, dtype, &gen)) : randn(s.b, dtype, &gen);
      const Tensor start = randn(product_shape(a, b), dtype, &gen);
      Tensor out = clone(start);
      const void* where = out.raw_data();
      const uint64_t version = out.version();
      Tensor& result = matmul_add_(out, a, b);
      EXPECT_EQ(&result, &out);
      EXPECT_EQ(out.raw_data(), where) << "written in place";
      EXPECT_GT(out.version(), version) << "the version counter tells saved tensors it changed";
      const double tol = dtype == kFloat64 ? 1e-12 : 2e-5;
      EXPECT_TRUE(all_close(out, start + matmul(a, b), tol, tol))
          << shape_str(s.a) << " @ " << shape_str(s.b) << " " << dtype_name(dtype);
    }
  }
}

TEST(MatmulAdd, AnEmptyContractionLeavesOutAsItWas) {
  Generator gen(32);
  const Tensor start = randn({4, 3}, kFloat64, &gen);
  Tensor out = clone(start);
  matmul_add_(out, zeros({4, 0}, kFloat64), zeros({0, 3}, kFloat64));
  EXPECT_TRUE(all_close(out, start, 0, 0));
}

TEST(MatmulAdd, BadInputsAreNamedErrors) {
  Generator gen(33);
  const Tensor a = randn({4, 5}, kFloat64, &gen), b = randn({5, 3}, kFloat64, &gen);
  Tensor wrong_shape = zeros({4, 4}, kFloat64);
  EXPECT_LINEA_ERROR(matmul_add_(wrong_shape, a, b), "matmul_add_", "product's shape");
  Tensor inner = zeros({4, 3}, kFloat64);
  EXPECT_LINEA_ERROR(matmul_add_(inner, a, randn({4, 3}, kFloat64, &gen)), "matmul_add_", "inner sizes");
  Tensor strided = t(zeros({3, 4}, kFloat64));
  EXPECT_LINEA_ERROR(matmul_add_(strided, a, b), "matmul_add_", "contiguous");
  Tensor f32 = zeros({4, 3}, kFloat32);
  EXPECT_LINEA_ERROR(matmul_add_(f32, a, b), "matmul_add_");
  Tensor square = randn({5, 5}, kFloat64, &gen);
  EXPECT_LINEA_ERROR(matmul_add_(square, square, randn({5, 5}, kFloat64, &gen)), "matmul_add_", "shares memory");
  Tensor vector = zeros({4}, kFloat64);
  EXPECT_LINEA_ERROR(matmul_add_(vector, a, randn({5}, kFloat64, &gen)), "matmul_add_", "at least 2 dims");
  Tensor out = zeros({4, 3}, kFloat64);
  const Tensor needs_grad = randn({4, 5}, kFloat64, &gen).requires_grad_();
  EXPECT_LINEA_ERROR(matmul_add_(out, needs_grad, b), "matmul_add_", "requires grad");
  NoGradGuard no_grad;  // outside grad mode nothing is recorded, so nothing is refused
  matmul_add_(out, needs_grad, b);
  EXPECT_TRUE(all_close(out, matmul(needs_grad, b), 1e-12, 1e-12));
}

}  // namespace
}  // namespace linea::testing
