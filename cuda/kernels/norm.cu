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
// Dtypes (tensor/backend_kernels.def): activations X (x, dx, dx_add) and Y (y, dy), equal or float32
// and bfloat16; C = compute_t<X> (float32 for bfloat16) is what the kernels compute in and what
// the parameters, their gradients and the statistics are stored in.
#include <algorithm>

#include "cuda/buffer.h"
#include "cuda/kernels/norm_packed.cuh"
#include "cuda/kernels/rows.cuh"

namespace linea::cuda {

namespace {

template <class X, class Y, int kGroup, class C = compute_t<X>>
__global__ void __launch_bounds__(RowGroup<kGroup>::kBlockThreads)
    layer_norm_kernel(const X* x, const C* w, const C* b, C eps, Y* y, C* mean, C* rstd, int64_t rows,
                      int64_t cols) {
  using G = RowGroup<kGroup>;
  for (int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const X* xr = x + r * cols;
    C sum = 0;
    for (int64_t j = G::lane(); j < cols; j += kGroup) sum += static_cast<C>(xr[j]);
    const C mu = G::sum(sum) / static_cast<C>(cols);
    C sq = 0;
    for (int64_t j = G::lane(); j < cols; j += kGroup) {
      const C d = static_cast<C>(xr[j]) - mu;
      sq += d * d;
    }
    const C rs = C(1) / sqrt(G::sum(sq) / static_cast<C>(cols) + eps);
    if (G::lane() == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    Y* yr = y + r * cols;
    for (int64_t j = G::lane(); j < cols; j += kGroup) {
      C v = (static_cast<C>(xr[j]) - mu) * rs;
      if (w) v *= w[j];
      if (b) v += b[j];
      yr[j] = static_cast<Y>(v);
    }
  }
}

template <class X, class Y, int kGroup, class C = compute_t<X>>
__global__ void __launch_bounds__(RowGroup<kGroup>::kBlockThreads)
    rms_norm_kernel(const X* x, const C* w, C eps, Y* y, C* rstd, int64_t rows, int64_t cols) {
  using G = RowGroup<kGroup>;
  for (int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const X* xr = x + r * cols;
    C sq = 0;
    for (int64_t j = G::lane(); j < cols; j += kGroup) sq += static_cast<C>(xr[j]) * static_cast<C>(xr[j]);
    const C rs = C(1) / sqrt(G::sum(sq) / static_cast<C>(cols) + eps);
    if (G::lane() == 0) rstd[r] = rs;
    Y* yr = y + r * cols;
    for (int64_t j = G::lane(); j < cols; j += kGroup) {
      const C v = static_cast<C>(xr[j]) * rs;
      yr[j] = static_cast<Y>(w ? v * w[j] : v);
    }
  }
}

// forward was xhat = (x - mu) * rstd (mu = 0 for RMSNorm), y = xhat * w (+ b), so with g = dy * w:
//   LayerNorm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   RMSNorm:   dx = rstd * (g - xhat * mean(g * xhat))      (mu is not subtracted, so no mean(g))
template <class X, class Y, int kGroup, bool kRms, class C = compute_t<X>>
__global__ void __launch_bounds__(RowGroup<kGroup>::kBlockThreads)
    norm_backward_kernel(const X* x, const C* w, const C* mean, const C* rstd, const Y* dy, X* dx, int64_t rows,
                         int64_t cols) {
  using G = RowGroup<kGroup>;
  for (int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const X* xr = x + r * cols;
    const Y* dyr = dy + r * cols;
    const C mu = kRms ? C(0) : mean[r], rs = rstd[r];
    C sum_g = 0, sum_gx = 0;
    for (int64_t j = G::lane(); j < cols; j += kGroup) {
      const C g = w ? static_cast<C>(dyr[j]) * w[j] : static_cast<C>(dyr[j]);
      sum_g += g;
      sum_gx += g * (static_cast<C>(xr[j]) - mu) * rs;
    }
    const C mean_g = kRms ? C(0) : G::sum(sum_g) / static_cast<C>(cols);
    const C mean_gx = G::sum(sum_gx) / static_cast<C>(cols);
    X* dxr = dx + r * cols;
    for (int64_t j = G::lane(); j < cols; j += kGroup) {
      const C g = w ? static_cast<C>(dyr[j]) * w[j] : static_cast<C>(dyr[j]);
      dxr[j] = static_cast<X>(rs * (g - mean_g - (static_cast<C>(xr[j]) - mu) * rs * mean_gx));
    }
  }
}

constexpr int kParamCols = 32, kParamRowLanes = 8;

// dw = sum_rows dy * xhat and db = sum_rows dy over the rows of chunk blockIdx.y, for the 32
// columns of blockIdx.x: partial_w/b[chunk * cols + c].
template <class X, class Y, bool kRms, class C = compute_t<X>>
__global__ void __launch_bounds__(kParamCols* kParamRowLanes)
    norm_param_partials_kernel(const X* x, const C* mean, const C* rstd, const Y* dy, int64_t rows, int64_t cols,
                               int64_t rows_per_chunk, C* partial_w, C* partial_b) {
  __shared__ C sw[kParamRowLanes][kParamCols], sb[kParamRowLanes][kParamCols];
  const int tx = threadIdx.x % kParamCols, ty = threadIdx.x / kParamCols;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kParamCols + tx;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  C acc_w = 0, acc_b = 0;
  if (c < cols) {
    for (int64_t r = first + ty; r < last; r += kParamRowLanes) {
      const C g = static_cast<C>(dy[r * cols + c]);
      const C xhat = (static_cast<C>(x[r * cols + c]) - (kRms ? C(0) : mean[r])) * rstd[r];
      acc_w += g * xhat;
      acc_b += g;
    }
  }
  sw[ty][tx] = acc_w;
  sb[ty][tx] = acc_b;
  __syncthreads();
  if (ty == 0 && c < cols) {
    C total_w = 0, total_b = 0;
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
template <class X, class Y, bool kRms, class C = compute_t<X>>
void norm_param_grads(int device, cudaStream_t stream, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                      const Tensor& dy, const Tensor& dweight, const Tensor& dbias, const char* op) {
  const RowsCols rc = rows_cols(x.shape());
  // Chunks of at least 64 rows, at most 256 of them: enough blocks to fill the device for the usual
  // widths, and a partial buffer of at most 256 x C.
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(256, rc.rows / 64));
  const int64_t rows_per_chunk = (rc.rows + chunks - 1) / chunks;
  const int64_t col_blocks = (rc.cols + kParamCols - 1) / kParamCols;
  DeviceBuffer partial(sizeof(C) * chunks * rc.cols * 2, device);
  C* partial_w = partial.as<C>();
  C* partial_b = dbias.defined() ? partial_w + chunks * rc.cols : nullptr;
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(chunks));
  norm_param_partials_kernel<X, Y, kRms><<<grid, kParamCols * kParamRowLanes, 0, stream>>>(
      x.data<X>(), kRms ? nullptr : mean.data<C>(), rstd.data<C>(), dy.data<Y>(), rc.rows, rc.cols, rows_per_chunk,
      partial_w, partial_b);
  LINEA_CUDA_LAUNCH_CHECK(op, "parameter gradients of x ", x.describe());
  sum_chunks<C>(stream, partial_w, partial_b, chunks, rc.cols, dweight, dbias, op);
}

// weight and bias may be undefined (no affine part).
Tensor contiguous_or_none(const Tensor& t) { return t.defined() ? contiguous_copy(t) : t; }

// The address and element size of a tensor's data, for the packed kernels' alignment check
// (nothing for an undefined tensor).
norm_packed::Rows rows_at(const Tensor& t) {
  return {t.defined() ? t.raw_data() : nullptr, t.defined() ? dtype_size(t.dtype()) : 0};
}

// The packed kernels (norm_packed.cuh) where the rows allow them; false where they do not. mean,
// bias and dbias are undefined for RMSNorm.
template <class X, class Y, bool kRms, class C = compute_t<X>>
bool packed_forward(int device, cudaStream_t stream, const Tensor& x, const Tensor& weight, const Tensor& bias,
                    double eps, const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  const RowsCols rc = rows_cols(x.shape());
  const int packs =
      norm_packed::packs_per_lane<C>(rc.cols, {rows_at(x), rows_at(y), rows_at(weight), rows_at(bias)});
  if (packs == 0 || !y.is_contiguous()) return false;
  norm_packed::with_packs(packs, [&]<int kPacks>() {
    norm_packed::norm_forward_kernel<X, Y, kPacks, kRms>
        <<<row_blocks<32>(rc.rows, device), 32 * norm_packed::kNormWarps, 0, stream>>>(
            x.data<X>(), data_or_null<C>(weight), data_or_null<C>(bias), static_cast<C>(eps), y.data<Y>(),
            kRms ? nullptr : mean.data<C>(), rstd.data<C>(), rc.rows, static_cast<int>(rc.cols));
  });
  LINEA_CUDA_LAUNCH_CHECK(kRms ? "rms_norm" : "layer_norm", "x ", x.describe());
  return true;
}

// dx_add: added to dx in the kernel (undefined: nothing); its rows must be contiguous and start on
// a pack's boundary like the others'.
template <class X, class Y, bool kRms, class C = compute_t<X>>
bool packed_backward(int device, cudaStream_t stream, const Tensor& x, const Tensor& weight, const Tensor& mean,
                     const Tensor& rstd, const Tensor& dy, const Tensor& dx, const Tensor& dweight,
                     const Tensor& dbias, const Tensor& dx_add) {
  const RowsCols rc = rows_cols(x.shape());
  const int packs =
      norm_packed::packs_per_lane<C>(rc.cols, {rows_at(x), rows_at(dy), rows_at(dx), rows_at(weight), rows_at(dx_add)});
  if (packs == 0 || !dx.is_contiguous() || (dx_add.defined() && !dx_add.is_contiguous())) return false;
  const char* op = kRms ? "rms_norm_backward" : "layer_norm_backward";
  // Chunks of at least 32 rows (four per warp), at most 1024 of them.
  const int64_t rows_per_chunk = ceil_div(rc.rows, std::max<int64_t>(1, std::min<int64_t>(1024, rc.rows / 32)));
  const int64_t chunks = ceil_div(rc.rows, rows_per_chunk);
  const bool sums = dweight.defined() || dbias.defined();
  DeviceBuffer partial(sums ? sizeof(C) * chunks * rc.cols * 2 : 0, device);
  C* partial_w = sums ? partial.as<C>() : nullptr;
  C* partial_b = dbias.defined() ? partial_w + chunks * rc.cols : nullptr;
  const size_t shared = sums ? sizeof(C) * norm_packed::kNormWarps * rc.cols : 0;
  norm_packed::with_packs(packs, [&]<int kPacks>() {
    norm_packed::norm_backward_kernel<X, Y, kPacks, kRms>
        <<<static_cast<unsigned>(chunks), 32 * norm_packed::kNormWarps, shared, stream>>>(
            x.data<X>(), data_or_null<C>(weight), kRms ? nullptr : mean.data<C>(), rstd.data<C>(), dy.data<Y>(),
            dx.data<X>(), rc.rows, static_cast<int>(rc.cols), rows_per_chunk, partial_w, partial_b,
            data_or_null<X>(dx_add));
  });
  LINEA_CUDA_LAUNCH_CHECK(op, "x ", x.describe());
  if (sums) sum_chunks<C>(stream, partial_w, partial_b, chunks, rc.cols, dweight, dbias, op);
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
  dispatch_in_out(x.dtype(), y.dtype(), "layer_norm", [&]<class X, class Y>() {
    using C = compute_t<X>;
    if (packed_forward<X, Y, false>(device_, stream, x, weight, bias, eps, y, mean, rstd)) return;
    with_row_group(rc.cols, rc.rows, [&]<int kGroup>() {
      layer_norm_kernel<X, Y, kGroup>
          <<<row_blocks<kGroup>(rc.rows, device_), RowGroup<kGroup>::kBlockThreads, 0, stream>>>(
              x.data<X>(), data_or_null<C>(weight), data_or_null<C>(bias), static_cast<C>(eps), y.data<Y>(),
              mean.data<C>(), rstd.data<C>(), rc.rows, rc.cols);
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
  dispatch_in_out(x.dtype(), dy.dtype(), "layer_norm_backward", [&]<class X, class Y>() {
    using C = compute_t<X>;
    added = packed_backward<X, Y, false>(device_, stream, x, weight, mean, rstd, dy, dx, dweight, dbias, dx_add);
    if (added) return;
    with_row_group(rc.cols, rc.rows, [&]<int kGroup>() {
      norm_backward_kernel<X, Y, kGroup, false>
          <<<row_blocks<kGroup>(rc.rows, device_), RowGroup<kGroup>::kBlockThreads, 0, stream>>>(
              x.data<X>(), data_or_null<C>(weight), mean.data<C>(), rstd.data<C>(), dy.data<Y>(), dx.data<X>(), rc.rows,
              rc.cols);
    });
    LINEA_CUDA_LAUNCH_CHECK("layer_norm_backward", "x ", x.describe());
    if (dweight.defined() || dbias.defined())
      norm_param_grads<X, Y, false>(device_, stream, x, mean, rstd, dy, dweight, dbias, "layer_norm_backward");
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
  dispatch_in_out(x.dtype(), y.dtype(), "rms_norm", [&]<class X, class Y>() {
    using C = compute_t<X>;
    if (packed_forward<X, Y, true>(device_, stream, x, weight, Tensor(), eps, y, Tensor(), rstd)) return;
    with_row_group(rc.cols, rc.rows, [&]<int kGroup>() {
      rms_norm_kernel<X, Y, kGroup>
          <<<row_blocks<kGroup>(rc.rows, device_), RowGroup<kGroup>::kBlockThreads, 0, stream>>>(
              x.data<X>(), data_or_null<C>(weight), static_cast<C>(eps), y.data<Y>(), rstd.data<C>(), rc.rows, rc.cols);
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
  dispatch_in_out(x.dtype(), dy.dtype(), "rms_norm_backward", [&]<class X, class Y>() {
    using C = compute_t<X>;
    added = packed_backward<X, Y, true>(device_, stream, x, weight, Tensor(), rstd, dy, dx, dweight, Tensor(), dx_add);
    if (added) return;
    with_row_group(rc.cols, rc.rows, [&]<int kGroup>() {
      norm_backward_kernel<X, Y, kGroup, true>
          <<<row_blocks<kGroup>(rc.rows, device_), RowGroup<kGroup>::kBlockThreads, 0, stream>>>(
              x.data<X>(), data_or_null<C>(weight), static_cast<const C*>(nullptr), rstd.data<C>(), dy.data<Y>(),
              dx.data<X>(), rc.rows,
              rc.cols);
    });
    LINEA_CUDA_LAUNCH_CHECK("rms_norm_backward", "x ", x.describe());
    if (dweight.defined())
      norm_param_grads<X, Y, true>(device_, stream, x, Tensor(), rstd, dy, dweight, Tensor(), "rms_norm_backward");
  });
  if (!added && dx_add.defined()) binary(BinaryOp::Add, dx, dx_add, dx);
}

}  // namespace linea::cuda
