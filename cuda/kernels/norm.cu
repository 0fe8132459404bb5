// LayerNorm and RMSNorm over the last dim, forward and backward, against the CPU oracle
// (cpu/norm.cpp). x is viewed as (rows, C).
//   rows of up to 1024 float32 (512 float64) that start on 16 bytes: a warp per row, the row in
//               its registers as 16-byte packs, and the backward's dx and parameter-gradient
//               partial sums in one pass (norm_packed.cuh).
//   other rows  the kernels below:
//   forward     one row group per row (rows.cuh): the mean first, then the variance around it
//               (two passes rather than E[x^2] - E[x]^2, which cancels badly), then y.
//   dx          one row group per row: the two row means backward needs, then dx.
//   dw, db      sums over rows, deterministic without atomics: blocks of 32 columns x 8 rows,
//               each over one chunk of rows, write per-chunk partial sums (summed over the 8
//               row lanes in a fixed order); a second kernel adds the chunks in order per column.
// Either way the chunking depends only on the shape, so every run gives the same bits.
#include <algorithm>

#include "cuda/buffer.h"
#include "cuda/kernels/norm_packed.cuh"
#include "cuda/kernels/rows.cuh"

namespace linea::cuda {

namespace {

template <class T, int kGroup>
__global__ void __launch_bounds__(RowGroup<kGroup>::kBlockThreads)
    layer_norm_kernel(const T* x, const T* w, const T* b, T eps, T* y, T* mean, T* rstd, int64_t rows,
                      int64_t cols) {
  using G = RowGroup<kGroup>;
  for (int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const T* xr = x + r * cols;
    T sum = 0;
    for (int64_t j = G::lane(); j < cols; j += kGroup) sum += xr[j];
    const T mu = G::sum(sum) / static_cast<T>(cols);
    T sq = 0;
    for (int64_t j = G::lane(); j < cols; j += kGroup) sq += (xr[j] - mu) * (xr[j] - mu);
    const T rs = T(1) / sqrt(G::sum(sq) / static_cast<T>(cols) + eps);
    if (G::lane() == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    T* yr = y + r * cols;
    for (int64_t j = G::lane(); j < cols; j += kGroup) {
      T v = (xr[j] - mu) * rs;
      if (w) v *= w[j];
      if (b) v += b[j];
      yr[j] = v;
    }
  }
}

template <class T, int kGroup>
__global__ void __launch_bounds__(RowGroup<kGroup>::kBlockThreads)
    rms_norm_kernel(const T* x, const T* w, T eps, T* y, T* rstd, int64_t rows, int64_t cols) {
  using G = RowGroup<kGroup>;
  for (int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const T* xr = x + r * cols;
    T sq = 0;
    for (int64_t j = G::lane(); j < cols; j += kGroup) sq += xr[j] * xr[j];
    const T rs = T(1) / sqrt(G::sum(sq) / static_cast<T>(cols) + eps);
    if (G::lane() == 0) rstd[r] = rs;
    T* yr = y + r * cols;
    for (int64_t j = G::lane(); j < cols; j += kGroup) yr[j] = w ? xr[j] * rs * w[j] : xr[j] * rs;
  }
}

// forward was xhat = (x - mu) * rstd (mu = 0 for RMSNorm), y = xhat * w (+ b), so with g = dy * w:
//   LayerNorm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   RMSNorm:   dx = rstd * (g - xhat * mean(g * xhat))      (mu is not subtracted, so no mean(g))
template <class T, int kGroup, bool kRms>
__global__ void __launch_bounds__(RowGroup<kGroup>::kBlockThreads)
    norm_backward_kernel(const T* x, const T* w, const T* mean, const T* rstd, const T* dy, T* dx, int64_t rows,
                         int64_t cols) {
  using G = RowGroup<kGroup>;
  for (int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const T* xr = x + r * cols;
    const T* dyr = dy + r * cols;
    const T mu = kRms ? T(0) : mean[r], rs = rstd[r];
    T sum_g = 0, sum_gx = 0;
    for (int64_t j = G::lane(); j < cols; j += kGroup) {
      const T g = w ? dyr[j] * w[j] : dyr[j];
      sum_g += g;
      sum_gx += g * (xr[j] - mu) * rs;
    }
    const T mean_g = kRms ? T(0) : G::sum(sum_g) / static_cast<T>(cols);
    const T mean_gx = G::sum(sum_gx) / static_cast<T>(cols);
    T* dxr = dx + r * cols;
    for (int64_t j = G::lane(); j < cols; j += kGroup) {
      const T g = w ? dyr[j] * w[j] : dyr[j];
      dxr[j] = rs * (g - mean_g - (xr[j] - mu) * rs * mean_gx);
    }
  }
}

constexpr int kParamCols = 32, kParamRowLanes = 8;

// dw = sum_rows dy * xhat and db = sum_rows dy over the rows of chunk blockIdx.y, for the 32
// columns of blockIdx.x: partial_w/b[chunk * cols + c].
template <class T, bool kRms>
__global__ void __launch_bounds__(kParamCols* kParamRowLanes)
    norm_param_partials_kernel(const T* x, const T* mean, const T* rstd, const T* dy, int64_t rows, int64_t cols,
                               int64_t rows_per_chunk, T* partial_w, T* partial_b) {
  __shared__ T sw[kParamRowLanes][kParamCols], sb[kParamRowLanes][kParamCols];
  const int tx = threadIdx.x % kParamCols, ty = threadIdx.x / kParamCols;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kParamCols + tx;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  T acc_w = 0, acc_b = 0;
  if (c < cols) {
    for (int64_t r = first + ty; r < last; r += kParamRowLanes) {
      const T g = dy[r * cols + c];
      const T xhat = (x[r * cols + c] - (kRms ? T(0) : mean[r])) * rstd[r];
      acc_w += g * xhat;
      acc_b += g;
    }
  }
  sw[ty][tx] = acc_w;
  sb[ty][tx] = acc_b;
  __syncthreads();
  if (ty == 0 && c < cols) {
    T total_w = 0, total_b = 0;
#pragma unroll
    for (int k = 0; k < kParamRowLanes; ++k) {
      total_w += sw[k][tx];
      total_b += sb[k][tx];
    }
    partial_w[blockIdx.y * cols + c] = total_w;
    if (partial_b) partial_b[blockIdx.y * cols + c] = total_b;
  }
}

// out[c] = sum over chunks: kParamRowLanes threads per column each add every kParamRowLanes-th
// chunk (independent chains of loads rather than one long one), then their sums are added in lane
// order. The order depends only on the shapes: deterministic.
template <class T>
__global__ void __launch_bounds__(kParamCols* kParamRowLanes)
    sum_chunks_kernel(const T* partial, int64_t chunks, int64_t cols, T* out) {
  __shared__ T lanes[kParamRowLanes][kParamCols];
  const int tx = threadIdx.x % kParamCols, ty = threadIdx.x / kParamCols;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kParamCols + tx;
  T total = 0;
  if (c < cols)
    for (int64_t k = ty; k < chunks; k += kParamRowLanes) total += partial[k * cols + c];
  lanes[ty][tx] = total;
  __syncthreads();
  if (ty == 0 && c < cols) {
    T sum = 0;
#pragma unroll
    for (int k = 0; k < kParamRowLanes; ++k) sum += lanes[k][tx];
    out[c] = sum;
  }
}

// dweight and dbias (each where defined) from the chunks' partial sums, added in chunk order.
// dweight is undefined when only dbias is wanted: its partial sums were then computed and are dropped.
template <class T>
void sum_chunks(cudaStream_t stream, const T* partial_w, const T* partial_b, int64_t chunks, int64_t cols,
                const Tensor& dweight, const Tensor& dbias, const char* op) {
  const auto column_blocks = static_cast<unsigned>(ceil_div(cols, kParamCols));
  if (dweight.defined())
    sum_chunks_kernel<T><<<column_blocks, kParamCols * kParamRowLanes, 0, stream>>>(partial_w, chunks, cols,
                                                                                    dweight.data<T>());
  if (dbias.defined())
    sum_chunks_kernel<T><<<column_blocks, kParamCols * kParamRowLanes, 0, stream>>>(partial_b, chunks, cols,
                                                                                    dbias.data<T>());
  LINEA_CUDA_LAUNCH_CHECK(op, "parameter gradients, ", cols, " columns");
}

// Launches the partial-sum and chunk-sum kernels for dweight (and dbias when defined).
template <class T, bool kRms>
void norm_param_grads(int device, cudaStream_t stream, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                      const Tensor& dy, const Tensor& dweight, const Tensor& dbias, const char* op) {
  const RowsCols rc = rows_cols(x.shape());
  // Chunks of at least 64 rows, at most 256 of them: enough blocks to fill the device for the usual
  // widths, and a partial buffer of at most 256 x C.
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(256, rc.rows / 64));
  const int64_t rows_per_chunk = (rc.rows + chunks - 1) / chunks;
  const int64_t col_blocks = (rc.cols + kParamCols - 1) / kParamCols;
  DeviceBuffer partial(sizeof(T) * chunks * rc.cols * 2, device);
  T* partial_w = partial.as<T>();
  T* partial_b = dbias.defined() ? partial_w + chunks * rc.cols : nullptr;
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(chunks));
  norm_param_partials_kernel<T, kRms><<<grid, kParamCols * kParamRowLanes, 0, stream>>>(
      x.data<T>(), kRms ? nullptr : mean.data<T>(), rstd.data<T>(), dy.data<T>(), rc.rows, rc.cols, rows_per_chunk,
      partial_w, partial_b);
  LINEA_CUDA_LAUNCH_CHECK(op, "parameter gradients of x ", x.describe());
  sum_chunks<T>(stream, partial_w, partial_b, chunks, rc.cols, dweight, dbias, op);
}

// weight and bias may be undefined (no affine part).
Tensor contiguous_or_none(const Tensor& t) { return t.defined() ? contiguous_copy(t) : t; }


// The packed kernels (norm_packed.cuh) where the rows allow them; false where they do not. mean,
// bias and dbias are undefined for RMSNorm.
template <class T, bool kRms>
bool packed_forward(int device, cudaStream_t stream, const Tensor& x, const Tensor& weight, const Tensor& bias,
                    double eps, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  const RowsCols rc = rows_cols(x.shape());
  const int packs = norm_packed::packs_per_lane<T>(
      rc.cols, {x.raw_data(), y.raw_data(), weight.defined() ? weight.raw_data() : nullptr,
                bias.defined() ? bias.raw_data() : nullptr});
  if (packs == 0 || !y.is_contiguous()) return false;
  norm_packed::with_packs(packs, [&]<int kPacks>() {
    norm_packed::norm_forward_kernel<T, kPacks, kRms>
        <<<row_blocks<32>(rc.rows, device), 32 * norm_packed::kNormWarps, 0, stream>>>(
            x.data<T>(), data_or_null<T>(weight), data_or_null<T>(bias), static_cast<T>(eps), y.data<T>(),
            kRms ? nullptr : mean.data<T>(), rstd.data<T>(), rc.rows, static_cast<int>(rc.cols));
  });
  LINEA_CUDA_LAUNCH_CHECK(kRms ? "rms_norm" : "layer_norm", "x ", x.describe());
  return true;
}

// dx_add: added to dx in the kernel (undefined: nothing); its rows must be contiguous and start on
// 16 bytes like the others'.
template <class T, bool kRms>
bool packed_backward(int device, cudaStream_t stream, const Tensor& x, const Tensor& weight, const Tensor& mean,
                     const Tensor& rstd, const Tensor& dy, const Tensor& dx, const Tensor& dweight,
                     const Tensor& dbias, const Tensor& dx_add) {
  const RowsCols rc = rows_cols(x.shape());
  const int packs = norm_packed::packs_per_lane<T>(
      rc.cols, {x.raw_data(), dy.raw_data(), dx.raw_data(), weight.defined() ? weight.raw_data() : nullptr,
                dx_add.defined() ? dx_add.raw_data() : nullptr});
  if (packs == 0 || !dx.is_contiguous() || (dx_add.defined() && !dx_add.is_contiguous())) return false;
  const char* op = kRms ? "rms_norm_backward" : "layer_norm_backward";
  // Chunks of at least 32 rows (four per warp), at most 1024 of them.
  const int64_t rows_per_chunk = ceil_div(rc.rows, std::max<int64_t>(1, std::min<int64_t>(1024, rc.rows / 32)));
  const int64_t chunks = ceil_div(rc.rows, rows_per_chunk);
  const bool sums = dweight.defined() || dbias.defined();
  DeviceBuffer partial(sums ? sizeof(T) * chunks * rc.cols * 2 : 0, device);
  T* partial_w = sums ? partial.as<T>() : nullptr;
  T* partial_b = dbias.defined() ? partial_w + chunks * rc.cols : nullptr;
  const size_t shared = sums ? sizeof(T) * norm_packed::kNormWarps * rc.cols : 0;
  norm_packed::with_packs(packs, [&]<int kPacks>() {
    norm_packed::norm_backward_kernel<T, kPacks, kRms>
        <<<static_cast<unsigned>(chunks), 32 * norm_packed::kNormWarps, shared, stream>>>(
            x.data<T>(), data_or_null<T>(weight), kRms ? nullptr : mean.data<T>(), rstd.data<T>(), dy.data<T>(),
            dx.data<T>(), rc.rows, static_cast<int>(rc.cols), rows_per_chunk, partial_w, partial_b,
            data_or_null<T>(dx_add));
  });
  LINEA_CUDA_LAUNCH_CHECK(op, "x ", x.describe());
  if (sums) sum_chunks<T>(stream, partial_w, partial_b, chunks, rc.cols, dweight, dbias, op);
  return true;
}

}  // namespace

void CudaBackend::layer_norm(const Tensor& x_, const Tensor& weight_, const Tensor& bias_, double eps, const Tensor& y,
                             const Tensor& mean, const Tensor& rstd) const {
  check_on_device(device_, "layer_norm", {&x_, &weight_, &bias_, &y, &mean, &rstd});
  const RowsCols rc = rows_cols(x_.shape());
  if (rc.rows == 0) return;
  const cudaStream_t stream = use_device(device_);
  const Tensor x = contiguous_copy(x_), weight = contiguous_or_none(weight_), bias = contiguous_or_none(bias_);
  dispatch_floating(x.dtype(), "layer_norm", [&]<class T>() {
    if (packed_forward<T, false>(device_, stream, x, weight, bias, eps, y, mean, rstd)) return;
    with_row_group(rc.cols, rc.rows, [&]<int kGroup>() {
      layer_norm_kernel<T, kGroup><<<row_blocks<kGroup>(rc.rows, device_), RowGroup<kGroup>::kBlockThreads, 0, stream>>>(
          x.data<T>(), data_or_null<T>(weight), data_or_null<T>(bias), static_cast<T>(eps), y.data<T>(),
          mean.data<T>(), rstd.data<T>(), rc.rows, rc.cols);
    });
    LINEA_CUDA_LAUNCH_CHECK("layer_norm", "x ", x.describe());
  });
}

void CudaBackend::layer_norm_backward(const Tensor& x_, const Tensor& weight_, const Tensor& mean_,
                                      const Tensor& rstd_, const Tensor& dy_, const Tensor& dx, const Tensor& dweight,
                                      const Tensor& dbias, const Tensor& dx_add) const {
  check_on_device(device_, "layer_norm_backward",
                  {&x_, &weight_, &mean_, &rstd_, &dy_, &dx, &dweight, &dbias, &dx_add});
  const RowsCols rc = rows_cols(x_.shape());
  const cudaStream_t stream = use_device(device_);
  if (rc.rows == 0) {  // no rows: the parameter gradients are empty sums
    if (dweight.defined()) fill(dweight, 0.0);
    if (dbias.defined()) fill(dbias, 0.0);
    return;
  }
  const Tensor x = contiguous_copy(x_), weight = contiguous_or_none(weight_), dy = contiguous_copy(dy_);
  const Tensor mean = contiguous_copy(mean_), rstd = contiguous_copy(rstd_);
  bool added = false;  // dx_add went in with the packed kernel
  dispatch_floating(x.dtype(), "layer_norm_backward", [&]<class T>() {
    added = packed_backward<T, false>(device_, stream, x, weight, mean, rstd, dy, dx, dweight, dbias, dx_add);
    if (added) return;
    with_row_group(rc.cols, rc.rows, [&]<int kGroup>() {
      norm_backward_kernel<T, kGroup, false><<<row_blocks<kGroup>(rc.rows, device_), RowGroup<kGroup>::kBlockThreads,
                                               0, stream>>>(x.data<T>(), data_or_null<T>(weight), mean.data<T>(),
                                                            rstd.data<T>(), dy.data<T>(), dx.data<T>(), rc.rows,
                                                            rc.cols);
    });
    LINEA_CUDA_LAUNCH_CHECK("layer_norm_backward", "x ", x.describe());
    if (dweight.defined() || dbias.defined())
      norm_param_grads<T, false>(device_, stream, x, mean, rstd, dy, dweight, dbias, "layer_norm_backward");
  });
  if (!added && dx_add.defined()) binary(BinaryOp::Add, dx, dx_add, dx);
}

void CudaBackend::rms_norm(const Tensor& x_, const Tensor& weight_, double eps, const Tensor& y,
                           const Tensor& rstd) const {
  check_on_device(device_, "rms_norm", {&x_, &weight_, &y, &rstd});
  const RowsCols rc = rows_cols(x_.shape());
  if (rc.rows == 0) return;
  const cudaStream_t stream = use_device(device_);
  const Tensor x = contiguous_copy(x_), weight = contiguous_or_none(weight_);
  dispatch_floating(x.dtype(), "rms_norm", [&]<class T>() {
    if (packed_forward<T, true>(device_, stream, x, weight, Tensor(), eps, y, Tensor(), rstd)) return;
    with_row_group(rc.cols, rc.rows, [&]<int kGroup>() {
      rms_norm_kernel<T, kGroup><<<row_blocks<kGroup>(rc.rows, device_), RowGroup<kGroup>::kBlockThreads, 0, stream>>>(
          x.data<T>(), data_or_null<T>(weight), static_cast<T>(eps), y.data<T>(), rstd.data<T>(), rc.rows, rc.cols);
    });
    LINEA_CUDA_LAUNCH_CHECK("rms_norm", "x ", x.describe());
  });
}

void CudaBackend::rms_norm_backward(const Tensor& x_, const Tensor& weight_, const Tensor& rstd_, const Tensor& dy_,
                                    const Tensor& dx, const Tensor& dweight, const Tensor& dx_add) const {
  check_on_device(device_, "rms_norm_backward", {&x_, &weight_, &rstd_, &dy_, &dx, &dweight, &dx_add});
  const RowsCols rc = rows_cols(x_.shape());
  const cudaStream_t stream = use_device(device_);
  if (rc.rows == 0) {
    if (dweight.defined()) fill(dweight, 0.0);
    return;
  }
  const Tensor x = contiguous_copy(x_), weight = contiguous_or_none(weight_), dy = contiguous_copy(dy_);
  const Tensor rstd = contiguous_copy(rstd_);
  bool added = false;  // dx_add went in with the packed kernel
  dispatch_floating(x.dtype(), "rms_norm_backward", [&]<class T>() {
    added =
        packed_backward<T, true>(device_, stream, x, weight, Tensor(), rstd, dy, dx, dweight, Tensor(), dx_add);
    if (added) return;
    with_row_group(rc.cols, rc.rows, [&]<int kGroup>() {
      norm_backward_kernel<T, kGroup, true><<<row_blocks<kGroup>(rc.rows, device_), RowGroup<kGroup>::kBlockThreads,
                                              0, stream>>>(x.data<T>(), data_or_null<T>(weight), nullptr,
                                                           rstd.data<T>(), dy.data<T>(), dx.data<T>(), rc.rows,
                                                           rc.cols);
    });
    LINEA_CUDA_LAUNCH_CHECK("rms_norm_backward", "x ", x.describe());
    if (dweight.defined())
      norm_param_grads<T, true>(device_, stream, x, Tensor(), rstd, dy, dweight, Tensor(), "rms_norm_backward");
  });
  if (!added && dx_add.defined()) binary(BinaryOp::Add, dx, dx_add, dx);
}

}  // namespace linea::cuda
