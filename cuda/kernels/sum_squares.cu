// Sums of squares of many tensors (the global gradient norm of clipping) in two launches, not one
// per tensor: a training step clips ~80 gradients, most of them small, and a launch costs more
// than such a tensor's work (~3 us each, ~0.3 ms of GPU time a step plus the gaps between them).
//
// Launch 1 (once per dtype present, normally one): each tensor gets a fixed number of blocks,
// blocks_for_squares(n), and each block adds a strided share of that tensor's elements in double
// and writes one partial. A block finds its tensor by a binary search over the table's first
// blocks. Launch 2: one warp per tensor adds that tensor's partials in order.
//
// A tensor's blocks, their shares and the order of the adds depend only on its size, never on
// its neighbours in the list, so the result is the same bits on every run and the same as one
// launch per tensor gave; each element is read once, as it is (no cast, no squared copy).
#include <algorithm>
#include <cstring>
#include <vector>

#include "cuda/buffer.h"
#include "cuda/cuda_backend.h"
#include "cuda/kernels/rows.cuh"
#include "cuda/launch.cuh"

namespace linea::cuda {

namespace {

constexpr int kSquaresThreads = 256;
constexpr int64_t kMaxSquaresBlocks = 256;

// One tensor of a launch: blocks [first_block, first_block + blocks) of the grid take its
// elements and write partial[first_partial ..) (the partials are in the caller's tensor order,
// the launches grouped by dtype, so the two can differ).
struct SquaresSlice {
  const void* data;
  int64_t n;
  int64_t first_block;
  int64_t blocks;
  int64_t first_partial;
};

// The slice that owns grid block b: the last one whose first_block <= b (every slice has at
// least one block, so first blocks strictly increase).
__device__ __forceinline__ const SquaresSlice& slice_of_block(const SquaresSlice* slices, int count, int64_t b) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (slices[mid].first_block <= b) lo = mid;
    else hi = mid - 1;
  }
  return slices[lo];
}

template <class T>
__global__ void __launch_bounds__(kSquaresThreads)
    squares_partial_kernel(const SquaresSlice* __restrict__ slices, int count, double* __restrict__ partial) {
  __shared__ double warps[kSquaresThreads / 32];
  const SquaresSlice& s = slice_of_block(slices, count, blockIdx.x);
  const T* __restrict__ x = static_cast<const T*>(s.data);
  const int64_t n = s.n, block = blockIdx.x - s.first_block, blocks = s.blocks;
  double acc = 0;
  for (int64_t i = block * kSquaresThreads + threadIdx.x; i < n; i += blocks * kSquaresThreads) {
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
    partial[s.first_partial + block] = total;
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

// The tensors of one dtype: slices [begin, end) of the table, `blocks` grid blocks in all.
struct DTypeLaunch {
  DType dtype;
  size_t begin, end;
  int64_t blocks;
};

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

  // The table, grouped by dtype in order of first appearance, one launch per group.
  std::vector<SquaresSlice> slices;
  std::vector<DTypeLaunch> launches;
  std::vector<bool> placed(xs.size(), false);
  for (size_t i = 0; i < xs.size(); ++i) {
    if (placed[i]) continue;
    DTypeLaunch launch{rows[i].dtype(), slices.size(), 0, 0};
    for (size_t j = i; j < xs.size(); ++j) {
      if (placed[j] || rows[j].dtype() != launch.dtype) continue;
      const int64_t blocks = first[j + 1] - first[j];
      slices.push_back({rows[j].raw_data(), rows[j].numel(), launch.blocks, blocks, first[j]});
      launch.blocks += blocks;
      placed[j] = true;
    }
    launch.end = slices.size();
    launches.push_back(launch);
  }

  // The table and the partials' offsets go up together, in one copy.
  const size_t table_bytes = sizeof(SquaresSlice) * slices.size(), offsets_bytes = sizeof(int64_t) * first.size();
  std::vector<unsigned char> staging(table_bytes + offsets_bytes);
  std::memcpy(staging.data(), slices.data(), table_bytes);
  std::memcpy(staging.data() + table_bytes, first.data(), offsets_bytes);
  DeviceBuffer uploaded(staging.size(), device_);
  copy_to_device(uploaded.as<unsigned char>(), staging.data(), staging.size(), device_);
  const auto* table = reinterpret_cast<const SquaresSlice*>(uploaded.as<unsigned char>());
  const auto* offsets = reinterpret_cast<const int64_t*>(uploaded.as<unsigned char>() + table_bytes);

  DeviceBuffer partial(sizeof(double) * static_cast<size_t>(first.back()), device_);
  for (const DTypeLaunch& launch : launches) {
    const int count = static_cast<int>(launch.end - launch.begin);
    dispatch_floating(launch.dtype, "sum_squares", [&]<class T>() {
      squares_partial_kernel<T><<<static_cast<unsigned>(launch.blocks), kSquaresThreads, 0, stream>>>(
          table + launch.begin, count, partial.as<double>());
    });
    LINEA_CUDA_LAUNCH_CHECK("sum_squares", count, " ", dtype_name(launch.dtype), " tensors in ", launch.blocks,
                            " blocks");
  }
  const auto tensors = static_cast<int64_t>(xs.size());
  sum_partials_kernel<<<static_cast<unsigned>(ceil_div(tensors * 32, kThreads)), kThreads, 0, stream>>>(
      partial.as<double>(), offsets, tensors, out.data<double>());
  LINEA_CUDA_LAUNCH_CHECK("sum_squares", tensors, " tensors");
}

}  // namespace linea::cuda
