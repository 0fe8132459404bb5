// Batched matmul on cuBLAS, taking the CPU's layout decisions (tensor/matmul_layout.h): a stored
// transpose becomes a transpose flag, a weight shared across the batch folds the batch into the
// rows of one GEMM, and only layouts no GEMM can read are copied.
//
// cuBLAS is column-major and linea row-major. A row-major (M, N) matrix is, byte for byte, the
// column-major (N, M) matrix C^T, so C = A B is computed as C^T = B^T A^T: operands swapped, M and
// N swapped, and each operand's "stored transposed" flag passed through as is.
//
// Batches: when the batch dims of a, b and out merge into one uniform stride each (a broadcast
// operand has stride 0), one strided-batched call does them all; otherwise the outer batch dims
// loop on the host, one strided-batched call per step.
//
// TF32's tensor cores read both operands along the contraction (32-bit elements have no
// transposing load). A weight shared across the batch whose rows run along the contraction, as
// in a Linear's input gradient dx = dy W, makes cuBLAS transpose it tile by tile as it loads: on an
// H200 such a product ran at about 2/3 of the forward's speed. Such a weight, small beside the
// other operand, is transposed into a scratch buffer first (cublasSgeam) and passed with a
// transpose flag (tools/gpu/gemm_shapes.cu --input-gradients measured both ways).
#include <algorithm>
#include <optional>

#include "cuda/backend.h"
#include "cuda/buffer.h"
#include "cuda/check.h"
#include "cuda/cublas.h"
#include "cuda/cuda_backend.h"
#include "cuda/stream.h"
#include "tensor/dim_runs.h"
#include "tensor/matmul_layout.h"

namespace linea::cuda {

namespace {

// cuBLAS runs each batch of a strided-batched call in one grid dimension, which some of its
// kernels cap at 65535.
constexpr int64_t kMaxBatchPerCall = 65535;

struct Gemm {
  cublasHandle_t handle;
  cudaDataType type;    // of a and b
  cudaDataType c_type;  // of out: type, or float32 for a bfloat16 product widened as it is stored
  cublasComputeType_t compute;
  const void* alpha;  // 1
  const void* beta;   // 0, or 1 to add the product to out
};

// out (m, n) row-major, ldc = n, batch of them `stride_c` apart; a (m, k), b (k, n).
void gemm_batched(const Gemm& g, const matmul_layout::Operand& la, const matmul_layout::Operand& lb, int64_t m,
                  int64_t n, int64_t k, const void* a, int64_t stride_a, const void* b, int64_t stride_b, void* c,
                  int64_t stride_c, int64_t batch, size_t elem, size_t out_elem) {
  for (int64_t first = 0; first < batch; first += kMaxBatchPerCall) {
    const int64_t count = std::min(kMaxBatchPerCall, batch - first);
    const char* pa = static_cast<const char*>(a) + first * stride_a * static_cast<int64_t>(elem);
    const char* pb = static_cast<const char*>(b) + first * stride_b * static_cast<int64_t>(elem);
    char* pc = static_cast<char*>(c) + first * stride_c * static_cast<int64_t>(out_elem);
    LINEA_CUBLAS_CHECK(cublas().gemm_strided_batched(g.handle, lb.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                     la.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, g.alpha, pb,
                                                     g.type, lb.ld, stride_b, pa, g.type, la.ld, stride_a, g.beta,
                                                     pc, g.c_type, n, stride_c, count, g.compute, CUBLAS_GEMM_DEFAULT),
                       "matmul", "m=", m, " n=", n, " k=", k, " batch=", count, " lda=", la.ld, " ldb=", lb.ld);
  }
}

// A float32 weight b (k, n) whose rows run along the contraction, at most 1/8 the size of a (so
// that transposing it costs little beside reading a), transposed into `scratch` as (n, k) rows:
// the operand to pass instead of b. Anything else: b as it is.
struct ContractionMajor {
  const void* data;
  matmul_layout::Operand layout;
};
ContractionMajor transposed_for_tf32(const Gemm& g, const void* b, const matmul_layout::Operand& lb, int64_t rows_a,
                                     int64_t n, int64_t k, std::optional<DeviceBuffer>& scratch, int device) {
  if (g.compute != CUBLAS_COMPUTE_32F_FAST_TF32 || lb.transposed || 8 * n > rows_a) return {b, lb};
  scratch.emplace(sizeof(float) * static_cast<size_t>(n * k), device);
  const float one = 1.0f, zero = 0.0f;
  float* bt = scratch->as<float>();
  // Column-major, b is (n, k) with leading dim lb.ld and bt (k, n) with leading dim k: bt = b^T.
  LINEA_CUBLAS_CHECK(cublas().sgeam(g.handle, CUBLAS_OP_T, CUBLAS_OP_N, k, n, &one, static_cast<const float*>(b), lb.ld,
                                 &zero, bt, k, bt, k),
                     "matmul", "transposing a weight of ", k, " x ", n);
  return {bt, {true, true, k}};
}

}  // namespace

void CudaBackend::matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out, bool accumulate) const {
  const std::optional<matmul_layout::Plan> plan = matmul_layout::plan(*this, a_in, b_in, out, contiguous_copy, accumulate);
  if (!plan) return;
  const auto& [m, n, k, batch, a, b, la, lb] = *plan;

  use_device(device_);
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  Gemm g{cublas_handle(device_), CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, &one_f, &zero_f};
  if (out.dtype() == kFloat64) {
    g = {g.handle, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, &one_d, &zero_d};
  } else if (a.dtype() == kBFloat16) {  // bfloat16 tensor cores, float32 accumulation
    g.type = CUDA_R_16BF;
    g.c_type = out.dtype() == kBFloat16 ? CUDA_R_16BF : CUDA_R_32F;
  } else if (out.dtype() != kFloat32) {
    fail("matmul", "expected a floating dtype, got ", dtype_name(out.dtype()));
  } else if (tf32_enabled()) {
    g.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  }
  if (accumulate) g.beta = g.alpha;  // out += a b: beta = 1
  const size_t elem = dtype_size(a.dtype()), out_elem = dtype_size(out.dtype());

  // A weight shared across the batch: one (batch*m, k) x (k, n) GEMM.
  const int64_t row_stride =
      batch > 1 && matmul_layout::shared_across_batch(b) ? matmul_layout::collapsed_row_stride(a) : 0;
  if (row_stride > 0) {
    std::optional<DeviceBuffer> scratch;
    const ContractionMajor w = transposed_for_tf32(g, b.raw_data(), lb, batch * m, n, k, scratch, device_);
    gemm_batched(g, {true, false, row_stride}, w.layout, batch * m, n, k, a.raw_data(), 0, w.data, 0, out.raw_data(),
                 0, 1, elem, out_elem);
    return;
  }

  // Merge the batch dims of (out, a, b); the innermost merged dim goes to cuBLAS as the batch.
  const Shape batch_shape(out.shape().begin(), out.shape().end() - 2);
  const Shape c_strides = [&] {
    Shape s = contiguous_strides(batch_shape);
    for (auto& v : s) v *= m * n;
    return s;
  }();
  const Shape a_strides(a.strides().begin(), a.strides().end() - 2), b_strides(b.strides().begin(), b.strides().end() - 2);
  const Runs<3> runs = merge_dims<3>(batch_shape, {&c_strides, &a_strides, &b_strides});
  const size_t inner = runs.sizes.size() - 1;
  int64_t outer_count = 1;
  for (size_t d = 0; d < inner; ++d) outer_count *= runs.sizes[d];
  for (int64_t i = 0; i < outer_count; ++i) {
    int64_t rest = i, off_c = 0, off_a = 0, off_b = 0;
    for (size_t d = inner; d-- > 0;) {
      const int64_t idx = rest % runs.sizes[d];
      rest /= runs.sizes[d];
      off_c += idx * runs.strides[0][d];
      off_a += idx * runs.strides[1][d];
      off_b += idx * runs.strides[2][d];
    }
    const auto at = [&](const Tensor& t, int64_t off) {
      return static_cast<const char*>(t.raw_data()) + off * static_cast<int64_t>(elem);
    };
    gemm_batched(g, la, lb, m, n, k, at(a, off_a), runs.strides[1][inner], at(b, off_b), runs.strides[2][inner],
                 static_cast<char*>(out.raw_data()) + off_c * static_cast<int64_t>(out_elem), runs.strides[0][inner],
                 runs.sizes[inner], elem, out_elem);
  }
}

}  // namespace linea::cuda
