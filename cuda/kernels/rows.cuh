#pragma once
// What the row-wise fused kernels (softmax.cu, cross_entropy.cu, norm.cu) share: a group of
// threads that works on one row at a time (one warp, several rows per block, for short rows; a
// whole block for long ones), its reductions (sums, and the running max and sum of exponentials
// of an online softmax), and the host-side choice of group size.
//
// Reductions combine partial results in a fixed order (a butterfly in the warp, then the warps in
// index order), so a kernel gives the same bits on every run: no atomics anywhere.
#include <cmath>
#include <limits>

#include "cuda/cuda_backend.h"
#include "cuda/launch.cuh"

namespace linea::cuda {

// (max, sum of exp(x - max)) of part of a row: merging two such pairs rescales the sum with the
// smaller max, so one pass over the row gives its logsumexp (the online softmax of Milakov and
// Gimelshein, 2018). A row of all -inf keeps max -inf and sum 0 (its logsumexp is -inf).
template <class T>
struct MaxSum {
  T max = -std::numeric_limits<T>::infinity();
  T sum = 0;

  __device__ __forceinline__ void add(T x) {
    if (x > max) {
      sum = sum * exp(max - x) + T(1);  // exp(-inf) = 0 on the first finite value
      max = x;
    } else if (x != -std::numeric_limits<T>::infinity()) {
      sum += exp(x - max);  // a NaN x makes the sum NaN, as on the CPU
    }
  }
  __device__ __forceinline__ void merge(const MaxSum& o) {
    const T m = max > o.max ? max : o.max;
    if (m == -std::numeric_limits<T>::infinity()) return;  // both empty
    sum = sum * exp(max - m) + o.sum * exp(o.max - m);
    max = m;
  }
  // A NaN sum (a NaN in the row) stays NaN, as on the CPU: only a zero sum means "all -inf".
  __device__ __forceinline__ T logsumexp() const {
    return sum == T(0) ? -std::numeric_limits<T>::infinity() : max + log(sum);
  }
};

// kThreads threads per row: 32 (one warp; a block of 256 threads then holds 8 rows) or a whole
// block of 64..1024. Rows are visited in a grid-stride loop; every thread of a group runs the
// same iterations, so block-wide barriers inside a row are safe.
template <int kThreads>
struct RowGroup {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "a row group is whole warps");
  static constexpr bool kWarp = kThreads == 32;
  static constexpr int kBlockThreads = kWarp ? 256 : kThreads;
  static constexpr int kRowsPerBlock = kBlockThreads / kThreads;
  static constexpr int kWarps = kThreads / 32;

  __device__ static int lane() { return threadIdx.x % kThreads; }
  __device__ static int64_t first_row() {
    return static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kThreads;
  }
  __device__ static int64_t row_step() { return static_cast<int64_t>(gridDim.x) * kRowsPerBlock; }

  // Every thread of the group gets the sum.
  template <class T>
  __device__ static T sum(T v) {
    v = warp_sum(v);
    if constexpr (kWarp) {
      return v;
    } else {
      __shared__ T partial[kWarps];
      const int warp = threadIdx.x / 32;
      if (threadIdx.x % 32 == 0) partial[warp] = v;
      __syncthreads();
      T total = 0;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) total += partial[w];
      __syncthreads();  // before the next call overwrites partial
      return total;
    }
  }

  template <class T>
  __device__ static MaxSum<T> max_sum(MaxSum<T> v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      MaxSum<T> other;
      other.max = __shfl_xor_sync(0xffffffffu, v.max, offset);
      other.sum = __shfl_xor_sync(0xffffffffu, v.sum, offset);
      v.merge(other);
    }
    if constexpr (kWarp) {
      return v;
    } else {
      __shared__ T maxes[kWarps], sums[kWarps];
      const int warp = threadIdx.x / 32;
      if (threadIdx.x % 32 == 0) {
        maxes[warp] = v.max;
        sums[warp] = v.sum;
      }
      __syncthreads();
      MaxSum<T> total;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        MaxSum<T> part;
        part.max = maxes[w];
        part.sum = sums[w];
        total.merge(part);
      }
      __syncthreads();
      return total;
    }
  }
};

// Calls launch.template operator()<kThreads>() with the row group that suits `rows` rows of
// `cols` elements: a warp per row up to 1024 (up to 32 per thread) when there are rows enough to
// give the SMs many warps, then blocks of 256 and 1024 threads. With few rows (a decoding step:
// one row per sequence) a block per row even for short rows: a lone warp walks its 16 elements of
// a 512-wide row one dependent load after another, about 9 us on an H200 for an RMSNorm that a
// block does in a few.
inline constexpr int64_t kFewRows = 256;
template <class Launch>
void with_row_group(int64_t cols, int64_t rows, Launch&& launch) {
  if (cols <= 1024 && rows > kFewRows) launch.template operator()<32>();
  else if (cols <= 8192) launch.template operator()<256>();
  else launch.template operator()<1024>();
}

// Blocks for a row kernel: one group per row, at most a few waves of the device.
template <int kThreads>
unsigned row_blocks(int64_t rows, int device) {
  const int64_t needed = (rows + RowGroup<kThreads>::kRowsPerBlock - 1) / RowGroup<kThreads>::kRowsPerBlock;
  const int64_t cap = static_cast<int64_t>(sm_count(device)) * (2048 / RowGroup<kThreads>::kBlockThreads) * 4;
  return static_cast<unsigned>(needed < 1 ? 1 : (needed < cap ? needed : cap));
}

// Checks that every defined tensor lives on this backend's device.
inline void check_on_device(int device, const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    LINEA_CHECK(!t->defined() || t->device() == Device::cuda(device), op, "expected a tensor on cuda:", device,
                ", got ", t->describe());
}

}  // namespace linea::cuda
