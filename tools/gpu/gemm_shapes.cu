// The products of a linear attention layer's input projections, timed in the forms they could take
// (docs/benchmarks.md, "the input projections as one product").
//
// A layer projects its normed input x (N, D) five ways (q, k, v and the gate's two
// pre-activations), each a (P, D) weight. Forward, the input's gradient and the weights' gradients
// are timed as
//   parts      five products, one per weight (what five Linear layers do);
//   stacked    one product with the weights stacked (5P, D), the parts interleaved in each row of
//              the result (N, 5P);
//   batched    one strided-batched product, x shared (stride 0), each part's result contiguous
//              (5, N, P);
//   accumulate (the input's gradient) five products adding into one result (beta = 1).
// Then every product of a standard training step is timed with cuBLAS's default choice and with
// each algorithm cublasLt's heuristic offers: whether the default leaves time on the table.
// `--input-gradients` times only the input's gradient dx = dy W of each weight (out, in) of the
// step two ways: as it is (W's rows run along the contraction, which TF32's tensor cores cannot
// read directly), and with W transposed first (cublasSgeam) so that both operands are read along
// the contraction, as in the forward.
// Build and run on the GPU machine (not part of the CMake build):
//   nvcc -arch=sm_90 -O3 tools/gpu/gemm_shapes.cu -lcublas -lcublasLt -o /tmp/gemm_shapes && /tmp/gemm_shapes
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "probe.cuh"

namespace {

constexpr int kN = 16 * 1024, kD = 512, kP = 512, kParts = 5;

// Row-major C (m, n) = op(A) op(B) written as cuBLAS's column-major C^T = op(B)^T op(A)^T.
struct Blas {
  cublasHandle_t handle;
  void gemm(cublasOperation_t tb, cublasOperation_t ta, int n, int m, int k, const float* b, int ldb,
            const float* a, int lda, float* c, int ldc, float beta, long long sb = 0, long long sa = 0,
            long long sc = 0, int batch = 1) const {
    const float one = 1.0f;
    CHECK(cublasGemmStridedBatchedEx(handle, tb, ta, n, m, k, &one, b, CUDA_R_32F, ldb, sb, a, CUDA_R_32F, lda, sa,
                                     &beta, c, CUDA_R_32F, ldc, sc, batch, CUBLAS_COMPUTE_32F_FAST_TF32,
                                     CUBLAS_GEMM_DEFAULT));
  }
};

// One product of the step as cuBLAS sees it (column-major, C (m, n) = op(A) (m, k) op(B) (k, n)).
struct Shape {
  const char* name;
  cublasOperation_t ta, tb;
  int m, n, k;
};

// Times cuBLAS's default choice for `s` and every algorithm cublasLt's heuristic offers; prints the
// default, the best and how many beat the default by more than 5%.
void time_algorithms(cublasHandle_t blas, cublasLtHandle_t lt, void* workspace, size_t workspace_bytes,
                     const Shape& s, const float* a, const float* b, float* c) {
  const int lda = s.ta == CUBLAS_OP_N ? s.m : s.k, ldb = s.tb == CUBLAS_OP_N ? s.k : s.n;
  const float one = 1.0f, zero = 0.0f;
  const double by_default = time_us([&] {
    CHECK(cublasGemmEx(blas, s.ta, s.tb, s.m, s.n, s.k, &one, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb, &zero, c,
                       CUDA_R_32F, s.m, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
  });
  cublasLtMatmulDesc_t desc;
  CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F));
  CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &s.ta, sizeof(s.ta)));
  CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &s.tb, sizeof(s.tb)));
  cublasLtMatrixLayout_t la, lb, lc;
  CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, s.ta == CUBLAS_OP_N ? s.m : s.k,
                                   s.ta == CUBLAS_OP_N ? s.k : s.m, lda));
  CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, s.tb == CUBLAS_OP_N ? s.k : s.n,
                                   s.tb == CUBLAS_OP_N ? s.n : s.k, ldb));
  CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, s.m, s.n, s.m));
  cublasLtMatmulPreference_t pref;
  CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                             sizeof(workspace_bytes)));
  cublasLtMatmulHeuristicResult_t results[16];
  int found = 0;
  CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 16, results, &found));
  double best = 1e30;
  int best_at = -1, faster = 0;
  for (int i = 0; i < found; ++i) {
    const double us = time_us([&] {
      CHECK(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, c, lc, c, lc, &results[i].algo, workspace,
                           workspace_bytes, nullptr));
    });
    if (us < best) best = us, best_at = i;
    faster += us < 0.95 * by_default;
  }
  const double gflop = 2.0 * s.m * s.n * s.k * 1e-9;
  std::printf("%-34s default %7.1f us (%4.0f TFLOP/s)  best of %2d: %7.1f us (#%d)  %d faster by >5%%\n", s.name,
              by_default, gflop / by_default * 1e3, found, best, best_at, faster);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
}

}  // namespace

// dx (N, in) = dy (N, out) W (out, in) for the step's weights, W as it is and transposed first.
void time_input_gradients(const Blas& blas) {
  const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  float* dy = filled(size_t(kN) * 8192);
  float* dx = filled(size_t(kN) * 2048);
  float* dx_transposed = filled(size_t(kN) * 2048);
  float* w = filled(size_t(8192) * 2048);
  float* wt = filled(size_t(8192) * 2048);
  const float one = 1.0f, zero = 0.0f;
  for (const auto& shape : std::vector<std::pair<int, int>>{{2560, 512}, {512, 512}, {2048, 512}, {512, 2048}, {8192, 512}}) {
    const int out = shape.first, in = shape.second;
    const double as_is = time_us([&] { blas.gemm(N, N, in, kN, out, w, in, dy, out, dx, in, 0.0f); });
    // W^T (in, out) row-major is column-major (out, in): geam writes op(W) with W column-major (in, out).
    const auto transpose = [&] {
      CHECK(cublasSgeam(blas.handle, T, N, out, in, &one, w, in, &zero, wt, out, wt, out));
    };
    const double transposing = time_us(transpose);
    const double transposed = time_us([&] { blas.gemm(T, N, in, kN, out, wt, out, dy, out, dx, in, 0.0f); });
    blas.gemm(T, N, in, kN, out, wt, out, dy, out, dx_transposed, in, 0.0f);
    blas.gemm(N, N, in, kN, out, w, in, dy, out, dx, in, 0.0f);
    std::printf("input grad %5d x %5d: as is %7.1f   transposed %5.1f + %7.1f = %7.1f   |difference| %.1e\n", out, in,
                as_is, transposing, transposed, transposing + transposed,
                max_abs_diff(dx, dx_transposed, size_t(kN) * in));
  }
}

int main(int argc, char** argv) {
  Blas blas;
  CHECK(cublasCreate(&blas.handle));
  size_t workspace_bytes = 64u << 20;
  void* workspace = nullptr;
  CHECK(cudaMalloc(&workspace, workspace_bytes));
  CHECK(cublasSetWorkspace(blas.handle, workspace, workspace_bytes));
  if (argc > 1 && std::string(argv[1]) == "--input-gradients") {
    time_input_gradients(blas);
    return 0;
  }
  float* x = filled(size_t(kN) * kD);
  float* w = filled(size_t(kParts) * kP * kD);
  float* y = filled(size_t(kParts) * kN * kP);   // results, either layout
  float* dy = filled(size_t(kParts) * kN * kP);  // their gradients, either layout
  float* dx = filled(size_t(kN) * kD);
  float* dw = filled(size_t(kParts) * kP * kD);
  const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  const long long part = static_cast<long long>(kN) * kP, weight = static_cast<long long>(kP) * kD;
  std::printf("N=%d D=%d, %d parts of %d (TF32, us)\n", kN, kD, kParts, kP);

  // y_p = x w_p^T.
  const double fwd_parts = time_us([&] {
    for (int p = 0; p < kParts; ++p) blas.gemm(T, N, kP, kN, kD, w + p * weight, kD, x, kD, y + p * part, kP, 0.0f);
  });
  const double fwd_stacked =
      time_us([&] { blas.gemm(T, N, kParts * kP, kN, kD, w, kD, x, kD, y, kParts * kP, 0.0f); });
  const double fwd_batched = time_us(
      [&] { blas.gemm(T, N, kP, kN, kD, w, kD, x, kD, y, kP, 0.0f, weight, 0, part, kParts); });
  std::printf("forward:         parts %7.1f  stacked %7.1f  batched %7.1f\n", fwd_parts, fwd_stacked, fwd_batched);

  // dx = sum_p dy_p w_p.
  const double dx_accumulate = time_us([&] {
    for (int p = 0; p < kParts; ++p)
      blas.gemm(N, N, kD, kN, kP, w + p * weight, kD, dy + p * part, kP, dx, kD, p == 0 ? 0.0f : 1.0f);
  });
  const double dx_stacked =
      time_us([&] { blas.gemm(N, N, kD, kN, kParts * kP, w, kD, dy, kParts * kP, dx, kD, 0.0f); });
  const double dx_one = time_us([&] { blas.gemm(N, N, kD, kN, kP, w, kD, dy, kP, dx, kD, 0.0f); });
  std::printf("input gradient:  parts %7.1f (+4 additions)  accumulate %7.1f  stacked %7.1f\n", kParts * dx_one,
              dx_accumulate, dx_stacked);

  // dw_p = dy_p^T x.
  const double dw_one = time_us([&] { blas.gemm(N, T, kD, kP, kN, x, kD, dy, kP, dw, kD, 0.0f); });
  const double dw_stacked =
      time_us([&] { blas.gemm(N, T, kD, kParts * kP, kN, x, kD, dy, kParts * kP, dw, kD, 0.0f); });
  const double dw_batched =
      time_us([&] { blas.gemm(N, T, kD, kP, kN, x, kD, dy, kP, dw, kD, 0.0f, 0, part, weight, kParts); });
  std::printf("weight gradient: parts %7.1f  stacked %7.1f  batched %7.1f\n", kParts * dw_one, dw_stacked,
              dw_batched);

  // Every product of a standard training step (N tokens, width 512, MLP 2048, vocabulary 8192):
  // forward y = x w^T, the input's gradient dx = dy w, the weight's gradient dw = dy^T x.
  cublasLtHandle_t lt;
  CHECK(cublasLtCreate(&lt));
  float* big_a = filled(size_t(kN) * 8192);
  float* big_b = filled(size_t(kN) * 8192);
  float* big_c = filled(size_t(kN) * 8192);
  char name[64];
  for (const auto& [out, in] : std::vector<std::pair<int, int>>{{512, 512}, {2560, 512}, {2048, 512}, {512, 2048}, {8192, 512}}) {
    std::snprintf(name, sizeof name, "forward    %5d x %5d", out, in);
    time_algorithms(blas.handle, lt, workspace, workspace_bytes, {name, T, N, out, kN, in}, big_a, big_b, big_c);
    std::snprintf(name, sizeof name, "input grad %5d x %5d", out, in);
    time_algorithms(blas.handle, lt, workspace, workspace_bytes, {name, N, N, in, kN, out}, big_a, big_b, big_c);
    std::snprintf(name, sizeof name, "weight grad %5d x %5d", out, in);
    time_algorithms(blas.handle, lt, workspace, workspace_bytes, {name, N, T, in, out, kN}, big_a, big_b, big_c);
  }
  return 0;
}
