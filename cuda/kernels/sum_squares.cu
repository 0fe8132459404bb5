// Sums of squares of many tensors (the global gradient norm of clipping) in two kinds of launch:
// per tensor, a fixed grid of blocks each adds a strided share of the elements in double and
// writes one partial; then one warp per tensor adds that tensor's partials in order. The grid
// depends only on the size, so the result is the same bits on every run, and each element is
// read once, as it is (no cast, no squared copy).
#include <algorithm>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/cuda_backend.h"
#include "cuda/kernels/rows.cuh"
#include "cuda/launch.cuh"

namespace linea::cuda {

namespace {

constexpr int kSquaresThreads = 256;
constexpr int64_t kMaxSquaresBlocks = 256;

template <class T>
__global__ void __launch_bounds__(kSquaresThreads)
    squares_partial_kernel(const T* __restrict__ x, int64_t n, double* __restrict__ partial) {
  __shared__ double warps[kSquaresThreads / 32];
  double acc = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kSquaresThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kSquaresThreads) {
    const double v = static_cast<double>(x[i]);
    acc += v * v;
  }
  acc = warp_sum(acc);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
#pragma unroll
    for (int w = 0; w < kSquaresThreads / 32; ++w) total += warps[w];
    partial[blockIdx.x] = total;
  }
}

// out[i] = sum of partial[first[i] .. first[i + 1]), one warp per tensor.
__global__ void sum_partials_kernel(const double* partial, const int64_t* first, int64_t tensors, double* out) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (i >= tensors) return;
  double acc = 0;
  for (int64_t k = first[i] + lane; k < first[i + 1]; k += 32) acc += partial[k];
  acc = warp_sum(acc);
  if (lane == 0) out[i] = acc;
}

int64_t blocks_for_squares(int64_t n) {
  return std::max<int64_t>(1, std::min<int64_t>(kMaxSquaresBlocks, ceil_div(n, 8 * kSquaresThreads)));
}

}  // namespace

void CudaBackend::sum_squares(const std::vector<Tensor>& xs, const Tensor& out) const {
  if (xs.empty()) return;
  const cudaStream_t stream = use_device(device_);
  std::vector<Tensor> rows(xs.size());
  std::vector<int64_t> first(xs.size() + 1, 0);
  for (size_t i = 0; i < xs.size(); ++i) {
    check_on_device(device_, "sum_squares", {&xs[i]});
    rows[i] = contiguous_copy(xs[i]);
    first[i + 1] = first[i] + blocks_for_squares(rows[i].numel());
  }
  DeviceBuffer partial(sizeof(double) * static_cast<size_t>(first.back()), device_);
  for (size_t i = 0; i < xs.size(); ++i) {
    const int64_t n = rows[i].numel(), blocks = first[i + 1] - first[i];
    dispatch_floating(rows[i].dtype(), "sum_squares", [&]<class T>() {
      squares_partial_kernel<T><<<static_cast<unsigned>(blocks), kSquaresThreads, 0, stream>>>(
          rows[i].data<T>(), n, partial.as<double>() + first[i]);
    });
    LINEA_CUDA_LAUNCH_CHECK("sum_squares", rows[i].describe());
  }
  DeviceBuffer offsets(sizeof(int64_t) * first.size(), device_);
  copy_to_device(offsets.as<int64_t>(), first.data(), sizeof(int64_t) * first.size(), device_);
  const auto tensors = static_cast<int64_t>(xs.size());
  sum_partials_kernel<<<static_cast<unsigned>(ceil_div(tensors * 32, kThreads)), kThreads, 0, stream>>>(
      partial.as<double>(), offsets.as<int64_t>(), tensors, out.data<double>());
  LINEA_CUDA_LAUNCH_CHECK("sum_squares", tensors, " tensors");
}

}  // namespace linea::cuda
