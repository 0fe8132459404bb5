// Softmax and log-softmax along any dim, forward and backward, against the CPU oracle
// (cpu/softmax.cpp). The input, made contiguous, is viewed as (outer, D, inner):
//   inner == 1 (the last dim, the hot case): one row group per row (rows.cuh: a warp for rows up
//     to 1024, a block beyond). One pass keeps a running max and sum of exponentials (online
//     softmax), the second writes: the row is read twice, never written in between.
//   inner > 1: one thread per (outer, inner) line; the threads of a warp take neighbouring inner
//     positions, so every step along D reads consecutive addresses. The same two passes.
// bfloat16 is read and written as such and computed in float32 (compute_t), rounded once.
#include "cuda/kernels/rows.cuh"

namespace linea::cuda {

namespace {

template <class T, int kGroup>
__global__ void __launch_bounds__(RowGroup<kGroup>::kBlockThreads)
    softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t cols, bool log) {
  using G = RowGroup<kGroup>;
  using C = compute_t<T>;
  for (int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const T* in = x + r * cols;
    T* out = y + r * cols;
    MaxSum<C> part;
    for (int64_t j = G::lane(); j < cols; j += kGroup) part.add(static_cast<C>(in[j]));
    const C lse = G::max_sum(part).logsumexp();
    for (int64_t j = G::lane(); j < cols; j += kGroup) {
      const C z = static_cast<C>(in[j]) - lse;
      out[j] = static_cast<T>(log ? z : exp(z));
    }
  }
}

// forward was y = softmax(x): dx = y (dy - sum(dy y));  log_softmax: dx = dy - e^y sum(dy).
template <class T, int kGroup>
__global__ void __launch_bounds__(RowGroup<kGroup>::kBlockThreads)
    softmax_backward_rows_kernel(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols, bool log) {
  using G = RowGroup<kGroup>;
  using C = compute_t<T>;
  for (int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const T* yr = y + r * cols;
    const T* dyr = dy + r * cols;
    T* dxr = dx + r * cols;
    C dot = 0;
    for (int64_t j = G::lane(); j < cols; j += kGroup) {
      const C g = static_cast<C>(dyr[j]);
      dot += log ? g : g * static_cast<C>(yr[j]);
    }
    dot = G::sum(dot);
    for (int64_t j = G::lane(); j < cols; j += kGroup) {
      const C yv = static_cast<C>(yr[j]), g = static_cast<C>(dyr[j]);
      dxr[j] = static_cast<T>(log ? g - exp(yv) * dot : yv * (g - dot));
    }
  }
}

template <class T>
__global__ void softmax_lines_kernel(const T* x, T* y, int64_t outer, int64_t size, int64_t inner, bool log) {
  using C = compute_t<T>;
  LINEA_GRID_STRIDE_LOOP(line, outer * inner) {
    const int64_t base = (line / inner) * size * inner + line % inner;
    MaxSum<C> all;
    for (int64_t j = 0; j < size; ++j) all.add(static_cast<C>(x[base + j * inner]));
    const C lse = all.logsumexp();
    for (int64_t j = 0; j < size; ++j) {
      const C z = static_cast<C>(x[base + j * inner]) - lse;
      y[base + j * inner] = static_cast<T>(log ? z : exp(z));
    }
  }
}

template <class T>
__global__ void softmax_backward_lines_kernel(const T* y, const T* dy, T* dx, int64_t outer, int64_t size,
                                              int64_t inner, bool log) {
  using C = compute_t<T>;
  LINEA_GRID_STRIDE_LOOP(line, outer * inner) {
    const int64_t base = (line / inner) * size * inner + line % inner;
    C dot = 0;
    for (int64_t j = 0; j < size; ++j) {
      const C g = static_cast<C>(dy[base + j * inner]);
      dot += log ? g : g * static_cast<C>(y[base + j * inner]);
    }
    for (int64_t j = 0; j < size; ++j) {
      const int64_t at = base + j * inner;
      const C yv = static_cast<C>(y[at]), g = static_cast<C>(dy[at]);
      dx[at] = static_cast<T>(log ? g - exp(yv) * dot : yv * (g - dot));
    }
  }
}

}  // namespace

void CudaBackend::softmax(const Tensor& x_, int64_t dim, bool log, const Tensor& y) const {
  check_on_device(device_, "softmax", {&x_, &y});
  if (x_.numel() == 0) return;
  const cudaStream_t stream = use_device(device_);
  const Tensor x = contiguous_copy(x_);
  const DimSplit s = split_at(x.shape(), dim);
  dispatch_floating_or_bf16(x.dtype(), "softmax", [&]<class T>() {
    if (s.inner == 1) {
      with_row_group(s.size, s.outer, [&]<int kGroup>() {
        softmax_rows_kernel<T, kGroup><<<row_blocks<kGroup>(s.outer, device_), RowGroup<kGroup>::kBlockThreads, 0,
                                         stream>>>(x.data<T>(), y.data<T>(), s.outer, s.size, log);
      });
    } else {
      softmax_lines_kernel<T><<<blocks_for(s.outer * s.inner, device_), kThreads, 0, stream>>>(
          x.data<T>(), y.data<T>(), s.outer, s.size, s.inner, log);
    }
    LINEA_CUDA_LAUNCH_CHECK(log ? "log_softmax" : "softmax", "shape ", shape_str(x.shape()), ", dim ", dim);
  });
}

void CudaBackend::softmax_backward(const Tensor& y_, const Tensor& dy_, int64_t dim, bool log,
                                   const Tensor& dx) const {
  check_on_device(device_, "softmax_backward", {&y_, &dy_, &dx});
  if (y_.numel() == 0) return;
  const cudaStream_t stream = use_device(device_);
  const Tensor y = contiguous_copy(y_), dy = contiguous_copy(dy_);
  const DimSplit s = split_at(y.shape(), dim);
  dispatch_floating_or_bf16(y.dtype(), "softmax_backward", [&]<class T>() {
    if (s.inner == 1) {
      with_row_group(s.size, s.outer, [&]<int kGroup>() {
        softmax_backward_rows_kernel<T, kGroup><<<row_blocks<kGroup>(s.outer, device_),
                                                  RowGroup<kGroup>::kBlockThreads, 0, stream>>>(
            y.data<T>(), dy.data<T>(), dx.data<T>(), s.outer, s.size, log);
      });
    } else {
      softmax_backward_lines_kernel<T><<<blocks_for(s.outer * s.inner, device_), kThreads, 0, stream>>>(
          y.data<T>(), dy.data<T>(), dx.data<T>(), s.outer, s.size, s.inner, log);
    }
    LINEA_CUDA_LAUNCH_CHECK(log ? "log_softmax_backward" : "softmax_backward", "shape ", shape_str(y.shape()),
                            ", dim ", dim);
  });
}

}  // namespace linea::cuda
