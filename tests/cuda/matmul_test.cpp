// CUDA matmul (cuBLAS) against the CPU's (OpenBLAS): plain, batched, broadcast batches, a weight
// shared across the batch (folded into one GEMM), stored transposes, batch dims that do not
// merge, vectors, empty and K = 0 products; TF32 off for float32 comparisons, and on with a
// bound that fits its 10-bit mantissa.
#include "tests/cuda/parity.h"

namespace linea {
namespace {

using testing::gpu;
using testing::matches_cpu;
using testing::NoTf32;
using testing::on_gpu;
using testing::random_normal;

const DType kFloats[] = {kFloat32, kFloat64};

// Sums of K products in another order than OpenBLAS. The rounding error of a float32 sum grows
// with its partial sums (~1e-7 * K / sqrt(2), 3e-5 at K = 513) whatever the final value, so a
// result near zero needs an absolute bound.
double rtol(DType dtype) { return dtype == kFloat64 ? 1e-11 : 1e-4; }
double atol(DType dtype) { return dtype == kFloat64 ? 1e-11 : 1e-3; }

// The CPU and GPU results of f(a, b) for a, b of the given shapes.
void expect_matmul_parity(const Shape& a_shape, const Shape& b_shape, DType dtype,
                          const std::function<Tensor(const Tensor&, const Tensor&)>& f, const char* what) {
  const Tensor a = random_normal(a_shape, dtype, 21), b = random_normal(b_shape, dtype, 22);
  EXPECT_TRUE(matches_cpu(f(on_gpu(a), on_gpu(b)), f(a, b), rtol(dtype), atol(dtype)))
      << what << " " << shape_str(a_shape) << " @ " << shape_str(b_shape) << " " << dtype_name(dtype);
}

TEST(CudaMatmul, MatchesTheCpuInEveryArrangement) {
  LINEA_SKIP_WITHOUT_CUDA();
  const NoTf32 exact;
  const auto mm = [](const Tensor& a, const Tensor& b) { return matmul(a, b); };
  const auto a_t = [](const Tensor& a, const Tensor& b) { return matmul(transpose(a, -1, -2), b); };
  const auto b_t = [](const Tensor& a, const Tensor& b) { return matmul(a, transpose(b, -1, -2)); };
  const auto both_t = [](const Tensor& a, const Tensor& b) { return matmul(transpose(a, -1, -2), transpose(b, -1, -2)); };
  for (DType dtype : kFloats) {
    expect_matmul_parity({1, 1}, {1, 1}, dtype, mm, "1x1");
    expect_matmul_parity({3, 5}, {5, 7}, dtype, mm, "small");
    expect_matmul_parity({37, 129}, {129, 65}, dtype, mm, "awkward");
    expect_matmul_parity({257, 513}, {513, 129}, dtype, mm, "larger");
    expect_matmul_parity({129, 37}, {129, 65}, dtype, a_t, "a stored transposed");
    expect_matmul_parity({37, 129}, {65, 129}, dtype, b_t, "b stored transposed (a Linear weight)");
    expect_matmul_parity({129, 37}, {65, 129}, dtype, both_t, "both transposed");
    expect_matmul_parity({4, 3, 5, 7}, {7, 6}, dtype, mm, "shared weight, batch folded into rows");
    expect_matmul_parity({4, 3, 5, 7}, {6, 7}, dtype, b_t, "shared transposed weight");
    expect_matmul_parity({6, 1, 7}, {7, 9}, dtype, mm, "M = 1 rows folded");
    expect_matmul_parity({2, 3, 5, 7}, {2, 3, 7, 4}, dtype, mm, "batched");
    expect_matmul_parity({2, 3, 7, 5}, {2, 3, 7, 4}, dtype, a_t, "batched, a transposed");
    expect_matmul_parity({2, 1, 5, 7}, {1, 3, 7, 4}, dtype, mm, "broadcast batch dims");
    expect_matmul_parity({5, 7}, {3, 7, 4}, dtype, mm, "a shared across b's batch");
    expect_matmul_parity({7}, {7, 4}, dtype, mm, "vector @ matrix");
    expect_matmul_parity({5, 7}, {7}, dtype, mm, "matrix @ vector");
    expect_matmul_parity({7}, {7}, dtype, mm, "dot");
    // Batch dims whose strides do not merge: a loop over the outer dim, batched inside.
    expect_matmul_parity({3, 2, 5, 7}, {2, 3, 7, 4}, dtype,
                         [](const Tensor& a, const Tensor& b) { return matmul(permute(a, {1, 0, 2, 3}), b); },
                         "permuted batch dims");
    // A layout no GEMM reads (both strides > 1): copied first.
    expect_matmul_parity({10, 14}, {7, 4}, dtype,
                         [](const Tensor& a, const Tensor& b) { return matmul(slice(slice(a, 0, 0, 10, 2), 1, 0, 14, 2), b); },
                         "strided operand");
  }
}

TEST(CudaMatmul, EmptyAndZeroKProducts) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor zero_rows = matmul(zeros({0, 7}, {kFloat32, gpu()}), zeros({7, 4}, {kFloat32, gpu()}));
  EXPECT_EQ(zero_rows.shape(), (Shape{0, 4}));
  const Tensor k0 = matmul(zeros({5, 0}, {kFloat32, gpu()}), zeros({0, 4}, {kFloat32, gpu()}));
  EXPECT_EQ(k0.to_vector<float>(), std::vector<float>(20, 0.0f));
}

// matmul_add_ (out += a b: cuBLAS with beta = 1) against the CPU's (OpenBLAS, beta = 1), from the
// same random out: a prefill's x @ t(W) (the batch folded into one GEMM's rows; one row), plain and
// batched products, K = 0 (out as it was); and with TF32 on, a weight transposed before the product
// (the scratch path) still adds into out.
TEST(CudaMatmul, MatmulAddMatchesTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  struct Case {
    Shape a, b;
    bool b_transposed;
  };
  const Case cases[] = {{{37, 129}, {129, 65}, false}, {{2, 77, 512}, {512, 512}, true}, {{1, 1, 100}, {48, 100}, true},
                        {{2, 3, 5, 7}, {2, 3, 7, 4}, false}, {{5, 0}, {0, 3}, false}};
  auto expect_parity = [](const Case& c, DType dtype, double rtol, double atol) {
    const Tensor a = random_normal(c.a, dtype, 51), drawn = random_normal(c.b, dtype, 52);
    const Tensor b = c.b_transposed ? t(drawn) : drawn;
    const Tensor start = random_normal(matmul(a, b).shape(), dtype, 53);
    Tensor on_device = on_gpu(start), on_host = clone(start);
    matmul_add_(on_device, on_gpu(a), c.b_transposed ? t(on_gpu(drawn)) : on_gpu(drawn));
    matmul_add_(on_host, a, b);
    EXPECT_TRUE(matches_cpu(on_device, on_host, rtol, atol))
        << shape_str(c.a) << " @ " << shape_str(c.b) << (c.b_transposed ? " transposed" : "") << " "
        << dtype_name(dtype);
  };
  {
    const NoTf32 exact;
    for (DType dtype : kFloats)
      for (const Case& c : cases) expect_parity(c, dtype, rtol(dtype), atol(dtype));
  }
  const testing::Tf32Setting tf32(true);
  expect_parity({{4, 100, 37}, {37, 48}, false}, kFloat32, 1e-2, 0.1);
  expect_parity({{2, 77, 512}, {512, 512}, true}, kFloat32, 1e-2, 0.1);
}

TEST(CudaMatmul, Tf32IsSwitchableAndClose) {
  LINEA_SKIP_WITHOUT_CUDA();
  const bool was = cuda::tf32_enabled();
  cuda::set_tf32(false);
  EXPECT_FALSE(cuda::tf32_enabled());
  cuda::set_tf32(true);
  EXPECT_TRUE(cuda::tf32_enabled());
  // TF32 rounds inputs to 10 mantissa bits: relative errors of ~1e-3 per product.
  const Tensor a = random_normal({64, 300}, kFloat32, 23), b = random_normal({300, 48}, kFloat32, 24);
  EXPECT_TRUE(matches_cpu(matmul(on_gpu(a), on_gpu(b)), matmul(a, b), 1e-2, 0.1));
  // float64 never uses it.
  const Tensor a64 = to(a, kFloat64), b64 = to(b, kFloat64);
  EXPECT_TRUE(matches_cpu(matmul(on_gpu(a64), on_gpu(b64)), matmul(a64, b64), 1e-11, 1e-11));
  cuda::set_tf32(was);
}

// With TF32 on, a weight shared across the batch whose rows run along the contraction (b of
// (k, n), eight or more times smaller than a) is transposed before the product
// (cuda/kernels/matmul.cpp): the results are those of the product as written, also for a weight
// whose rows lie apart (a narrowed view) and for one just too large to be transposed.
TEST(CudaMatmul, Tf32TransposesASmallWeightReadAcrossTheContraction) {
  LINEA_SKIP_WITHOUT_CUDA();
  const testing::Tf32Setting tf32(true);
  const Tensor a = random_normal({4, 100, 37}, kFloat32, 25), wide = random_normal({37, 60}, kFloat32, 26);
  for (int64_t n : {48, 50, 51}) {  // 8 n <= 400 rows of a, and just above
    const Tensor b = narrow(wide, 1, 3, n);
    EXPECT_TRUE(matches_cpu(matmul(on_gpu(a), on_gpu(b)), matmul(a, b), 1e-2, 0.1)) << "n " << n;
    EXPECT_TRUE(matches_cpu(matmul(on_gpu(a), contiguous(on_gpu(b))), matmul(a, b), 1e-2, 0.1)) << "n " << n;
  }
}

}  // namespace
}  // namespace linea
