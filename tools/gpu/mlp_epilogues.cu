// The MLP's products with their neighbours in cublasLt's epilogues, against the product and a
// separate elementwise kernel (docs/benchmarks.md, "the MLP's activation in the products").
//
// At the standard step's shapes (N = 16k tokens, width 512, hidden 2048, TF32), each pair is timed
// and its results compared:
//   forward     pre = x W1^T, h = gelu_tanh(pre)       against GELU_AUX: h, with pre kept as aux
//   backward    dh = dy W2, dpre = dh * gelu'(pre)     against DGELU: dpre from the aux
//   residual    y = h W2^T, out = x + y                against beta = 1 with C = x, D = out
// The forward's check tells which GELU cublasLt applies: its h is compared with both GELUs of its
// own pre.
// Build and run on the GPU machine (not part of the CMake build):
//   nvcc -arch=sm_90 -O3 --extended-lambda tools/gpu/mlp_epilogues.cu -lcublasLt -o /tmp/mlp_epilogues && /tmp/mlp_epilogues
#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "probe.cuh"

namespace {

constexpr int kN = 16 * 1024, kD = 512, kH = 2048;
constexpr size_t kWorkspaceBytes = 64u << 20;

__device__ float gelu_tanh(float x) {
  const float inner = 0.7978845608f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}
__device__ float gelu_tanh_slope(float x) {
  const float inner = 0.7978845608f * (x + 0.044715f * x * x * x), t = tanhf(inner);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.7978845608f * (1.0f + 3.0f * 0.044715f * x * x);
}

// out = f(a[i], b[i]) for n floats, four at a time (n a multiple of 4).
template <class F>
__global__ void map2(const float4* a, const float4* b, float4* out, size_t n4, F f) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4; i += size_t(gridDim.x) * blockDim.x) {
    const float4 x = a[i], y = b ? b[i] : float4{};
    out[i] = {f(x.x, y.x), f(x.y, y.y), f(x.z, y.z), f(x.w, y.w)};
  }
}
template <class F>
void launch_map2(const float* a, const float* b, float* out, size_t n, F f) {
  map2<<<132 * 8, 256>>>(reinterpret_cast<const float4*>(a), reinterpret_cast<const float4*>(b),
                         reinterpret_cast<float4*>(out), n / 4, f);
}

// One cublasLt product, column-major: D (m, n) = op(A) (m, k) op(B) (k, n) [+ beta C], with an
// epilogue (and its aux matrix, m x n with leading dim m).
struct LtProduct {
  cublasLtHandle_t lt;
  void* workspace;
  cublasLtMatmulDesc_t desc{};
  cublasLtMatrixLayout_t la{}, lb{}, lc{};
  cublasLtMatmulAlgo_t algo{};
  bool found = false;

  LtProduct(cublasLtHandle_t handle, void* ws, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
            cublasLtEpilogue_t epilogue, const float* aux)
      : lt(handle), workspace(ws) {
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    if (aux) {
      const int64_t ld = m;
      CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
      CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, ta == CUBLAS_OP_N ? m : k, ta == CUBLAS_OP_N ? k : m,
                                     ta == CUBLAS_OP_N ? m : k));
    CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, tb == CUBLAS_OP_N ? k : n, tb == CUBLAS_OP_N ? n : k,
                                     tb == CUBLAS_OP_N ? k : n));
    CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m));
    cublasLtMatmulPreference_t pref;
    CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspaceBytes,
                                               sizeof kWorkspaceBytes));
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const auto status = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &result, &count);
    found = status == CUBLAS_STATUS_SUCCESS && count > 0;
    algo = result.algo;
    cublasLtMatmulPreferenceDestroy(pref);
  }
  void run(const float* a, const float* b, float beta, const float* c, float* d) const {
    const float one = 1.0f;
    CHECK(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &beta, c, lc, d, lc, &algo, workspace, kWorkspaceBytes, 0));
  }
};

}  // namespace

int main() {
  cublasLtHandle_t lt;
  CHECK(cublasLtCreate(&lt));
  void* workspace = nullptr;
  CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
  const size_t hidden = size_t(kN) * kH, width = size_t(kN) * kD;
  float *x = filled(width), *w1 = filled(size_t(kH) * kD), *w2 = filled(size_t(kD) * kH), *dy = filled(width);
  float *pre = filled(hidden), *h = filled(hidden), *dh = filled(hidden), *dpre = filled(hidden),
        *ref = filled(hidden), *y = filled(width), *out = filled(width), *out_ref = filled(width);
  const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  const auto none = CUBLASLT_EPILOGUE_DEFAULT;
  std::printf("N=%d D=%d hidden=%d (TF32, us)\n", kN, kD, kH);

  // Row-major pre (N, H) = x W1^T is column-major pre^T (H, N) = W1 x^T: A = W1 (column-major D x H,
  // transposed), B = x^T (D x N).
  const LtProduct fc1(lt, workspace, T, N, kH, kN, kD, none, nullptr);
  const LtProduct fc1_gelu(lt, workspace, T, N, kH, kN, kD, CUBLASLT_EPILOGUE_GELU_AUX, pre);
  // dh (N, H) = dy W2: dh^T (H, N) = W2^T dy^T, W2 row-major (D, H) being column-major (H, D).
  const LtProduct fc2_back(lt, workspace, N, N, kH, kN, kD, none, nullptr);
  const LtProduct fc2_dgelu(lt, workspace, N, N, kH, kN, kD, CUBLASLT_EPILOGUE_DGELU, pre);
  // y (N, D) = h W2^T: y^T (D, N) = W2 h^T.
  const LtProduct fc2(lt, workspace, T, N, kD, kN, kH, none, nullptr);
  const std::pair<const char*, const LtProduct*> products[] = {
      {"fc1", &fc1}, {"fc1 + GELU_AUX", &fc1_gelu}, {"fc2 backward", &fc2_back}, {"fc2 backward + DGELU", &fc2_dgelu},
      {"fc2", &fc2}};
  for (const auto& [name, p] : products)
    if (!p->found) std::printf("no cublasLt algorithm for %s\n", name);
  if (!fc1.found || !fc1_gelu.found || !fc2_back.found || !fc2_dgelu.found || !fc2.found) return 1;

  const auto gelu = [] __device__(float v, float) { return gelu_tanh(v); };
  const auto gelu_erf = [] __device__(float v, float) { return 0.5f * v * (1.0f + erff(v * 0.70710678f)); };
  const auto gelu_back = [] __device__(float g, float v) { return g * gelu_tanh_slope(v); };
  const auto add = [] __device__(float a, float b) { return a + b; };

  const double fwd_apart = time_us([&] {
    fc1.run(w1, x, 0.0f, pre, pre);
    launch_map2(pre, nullptr, h, hidden, gelu);
  });
  const double fwd_product = time_us([&] { fc1.run(w1, x, 0.0f, pre, pre); });
  const double fwd_fused = time_us([&] { fc1_gelu.run(w1, x, 0.0f, h, h); });
  launch_map2(pre, nullptr, ref, hidden, gelu);
  const float tanh_diff = max_abs_diff(h, ref, hidden);
  launch_map2(pre, nullptr, ref, hidden, gelu_erf);
  const float erf_diff = max_abs_diff(h, ref, hidden);
  std::printf("forward:   product + gelu %7.1f (product %7.1f)  GELU_AUX %7.1f   |h - gelu_tanh(aux)| %.2e, "
              "|h - gelu_erf(aux)| %.2e\n", fwd_apart, fwd_product, fwd_fused, tanh_diff, erf_diff);

  const double back_apart = time_us([&] {
    fc2_back.run(w2, dy, 0.0f, dh, dh);
    launch_map2(dh, pre, dpre, hidden, gelu_back);
  });
  const double back_product = time_us([&] { fc2_back.run(w2, dy, 0.0f, dh, dh); });
  const double back_fused = time_us([&] { fc2_dgelu.run(w2, dy, 0.0f, ref, ref); });
  const float back_diff = max_abs_diff(ref, dpre, hidden);
  std::printf("backward:  product + gelu' %7.1f (product %7.1f)  DGELU %7.1f   |difference| %.2e\n", back_apart,
              back_product, back_fused, back_diff);

  const double res_apart = time_us([&] {
    fc2.run(w2, h, 0.0f, y, y);
    launch_map2(x, y, out_ref, width, add);
  });
  const double res_fused = time_us([&] { fc2.run(w2, h, 1.0f, x, out); });
  const float res_diff = max_abs_diff(out, out_ref, width);
  std::printf("residual:  product + add %7.1f  beta = 1, C = x %7.1f   |difference| %.2e\n", res_apart, res_fused,
              res_diff);
  return 0;
}
