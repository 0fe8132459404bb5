// Drawing tokens from logits on the GPU (generation's draw: tensor/backend_kernels.def states the
// rule; cpu/sample.cpp is the reference), so the ids never leave the device.
//
//   greedy      one block per row: the largest logit, the lowest id on ties (a block reduction
//               of (value, id) pairs; the pair order makes it independent of the schedule).
//   otherwise   (1) copy the rows into (logit, id) pairs, flagging rows that hold a NaN or +inf;
//               (2) sort each row by decreasing logit with CUB's segmented radix sort, which is
//                   stable (ties stay in id order, as the CPU's stable_sort keeps them) and takes
//                   -0.0 and +0.0 as equal (as the CPU's `>` does);
//               (3) one block per row: p_i = exp((x_i - x_0) / temperature) in double over the
//                   first k, their running sums by a block scan tile by tile, then the nucleus cut
//                   (the first i whose running sum over the total reaches top_p) and the draw
//                   (the first kept i whose running sum exceeds u times the kept sum), each found
//                   as the smallest index satisfying it (a block min, no atomics).
// The CPU adds one term at a time; the scan adds in a tree (and the GPU's exp may differ from the
// C library's in the last bit), so the running sums can differ in the last bits and the two kernels disagree only when a sum lands within that rounding of top_p or
// of u times the kept sum: improbable for random logits, and the tests say so.
// No atomics anywhere: the same input gives the same ids on every run.
#include <math_constants.h>

#include <climits>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include "cuda/buffer.h"
#include "cuda/kernels/rows.cuh"

namespace linea::cuda {

namespace {

// One block per row for the row passes; a vocabulary of 50257 is 50 tiles of it.
constexpr int kRowThreads = 1024;

// A candidate of the greedy reduction: a logit and its id, id < 0 meaning none (a thread that saw
// no element). Compared in the logits' own type, which orders them as the CPU's double does.
template <class T>
struct Candidate {
  T value;
  int id;
};

// The larger value; on a tie (including -0.0 against +0.0) the lower id: associative and
// commutative, so any reduction order gives the CPU's std::max_element.
template <class T>
__device__ __forceinline__ Candidate<T> better_of(const Candidate<T>& a, const Candidate<T>& b) {
  if (a.id < 0) return b;
  if (b.id < 0) return a;
  if (a.value > b.value) return a;
  if (b.value > a.value) return b;
  return a.id < b.id ? a : b;
}

// The best candidate of the warp's lanes, in every lane.
template <class T>
__device__ __forceinline__ Candidate<T> warp_best(Candidate<T> c) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    c = better_of(c, {__shfl_xor_sync(0xffffffffu, c.value, offset), __shfl_xor_sync(0xffffffffu, c.id, offset)});
  return c;
}

struct MinOf {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a < b ? a : b; }
};

// A logit that makes its row unsamplable (the kernels' contract: NaN, +inf).
template <class T>
__device__ __forceinline__ bool poisons_row(T x) {
  return isnan(x) || x == T(CUDART_INF);
}

// The logits a thread asks for at once in the greedy draw (a vocabulary of 8,192 is one round).
constexpr int kGreedyLoads = 8;

// One block per row. Each thread asks for its logits kGreedyLoads at a time before it compares any:
// compared as they came, each comparison's branch waited for its load, and the draw made eight
// trips to L2 in a row (4.3 us of a batch-1 decoding step on an H200, where the floor of such a
// stage is about 1.7). The warps' bests then meet through shared memory after one barrier.
template <class T>
__global__ void __launch_bounds__(kRowThreads)
    greedy_kernel(const T* logits, int64_t row_stride, int64_t vocab, int64_t* out) {
  constexpr int kWarps = kRowThreads / 32;
  __shared__ Candidate<T> warp_bests[kWarps];
  __shared__ bool warp_poisoned[kWarps];
  // Launched overlapped (cuda/launch.cuh): it starts while the head's product still runs.
  wait_for_prior_kernels();
  const T* x = logits + static_cast<int64_t>(blockIdx.x) * row_stride;
  Candidate<T> best{T(0), -1};
  bool poisoned = false;
  // Each thread visits increasing ids, so a strict > keeps its lowest id among equal values.
  for (int64_t base = threadIdx.x; base < vocab; base += kGreedyLoads * kRowThreads) {
    T v[kGreedyLoads];
#pragma unroll
    for (int i = 0; i < kGreedyLoads; ++i) v[i] = base + i * kRowThreads < vocab ? x[base + i * kRowThreads] : T(0);
#pragma unroll
    for (int i = 0; i < kGreedyLoads; ++i) {
      if (base + i * kRowThreads >= vocab) break;
      poisoned = poisoned || poisons_row(v[i]);
      if (best.id < 0 || v[i] > best.value) best = {v[i], static_cast<int>(base + i * kRowThreads)};
    }
  }
  best = warp_best(best);
  poisoned = __any_sync(0xffffffffu, poisoned);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_bests[warp] = best, warp_poisoned[warp] = poisoned;
  __syncthreads();
  if (warp != 0) return;
  static_assert(kWarps == 32, "the first warp takes one warp's best a lane");
  const Candidate<T> row = warp_best(warp_bests[lane]);
  poisoned = __any_sync(0xffffffffu, warp_poisoned[lane]);
  // Without NaN or +inf, a row whose max is -inf holds only -inf.
  if (lane == 0) out[blockIdx.x] = poisoned || !(row.value > -T(CUDART_INF)) ? -1 : row.id;
}

// keys/ids (rows * vocab) get each row's logits (-0.0 made +0.0, belt and braces: the sort takes
// them as equal anyway) and ids; poisoned[r] = 1 for a row holding NaN or +inf (every writer
// stores the same 1: no atomics needed); offsets[r] = r * vocab for r <= rows, the segments.
template <class T>
__global__ void prepare_kernel(const T* logits, int64_t row_stride, int64_t rows, int64_t vocab, T* keys, int* ids,
                               int* poisoned, int* offsets) {
  const int64_t n = rows * vocab;
  LINEA_GRID_STRIDE_LOOP(e, n) {
    const int64_t r = e / vocab, j = e - r * vocab;
    const T x = logits[r * row_stride + j];
    if (poisons_row(x)) poisoned[r] = 1;
    keys[e] = x + T(0);
    ids[e] = static_cast<int>(j);
  }
  LINEA_GRID_STRIDE_LOOP(r, rows + 1) offsets[r] = static_cast<int>(r * vocab);
}

// The smallest i < n with pred(i) true, else `none`, in every thread of the block; tiles of
// kRowThreads in order, stopping at the first tile that holds one.
template <class Pred>
__device__ int64_t first_index(int64_t n, int64_t none, Pred pred,
                               typename cub::BlockReduce<int64_t, kRowThreads>::TempStorage& temp,
                               int64_t& shared_first) {
  using Reduce = cub::BlockReduce<int64_t, kRowThreads>;
  for (int64_t start = 0; start < n; start += kRowThreads) {
    const int64_t i = start + threadIdx.x;
    const int64_t mine = i < n && pred(i) ? i : LLONG_MAX;
    const int64_t first = Reduce(temp).Reduce(mine, MinOf());  // valid in thread 0
    if (threadIdx.x == 0) shared_first = first;
    __syncthreads();
    const int64_t found = shared_first;
    __syncthreads();  // everyone has read it before thread 0 writes again, and temp is free again
    if (found != LLONG_MAX) return found;
  }
  return none;
}

// One block per row of the sorted pairs; sums (rows * vocab, double) is scratch for the running
// sums. Every branch below depends only on block-wide values, so all threads take it together.
template <class T>
__global__ void __launch_bounds__(kRowThreads)
    draw_kernel(const T* sorted_keys, const int* sorted_ids, const int* poisoned, const double* u, int64_t vocab,
                int64_t k, double temperature, double top_p, double* sums, int64_t* out) {
  using Scan = cub::BlockScan<double, kRowThreads>;
  using Reduce = cub::BlockReduce<int64_t, kRowThreads>;
  __shared__ union {
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
  } temp;
  __shared__ int64_t shared_first;
  const int64_t r = blockIdx.x;
  const T* key = sorted_keys + r * vocab;
  double* s = sums + r * vocab;
  const double top = static_cast<double>(key[0]);
  if (poisoned[r] != 0 || !(top > -CUDART_INF)) {
    if (threadIdx.x == 0) out[r] = -1;
    return;
  }
  // s[i] = p_0 + ... + p_i over the first k.
  double carry = 0.0;
  for (int64_t start = 0; start < k; start += kRowThreads) {
    const int64_t i = start + threadIdx.x;
    const double p = i < k ? exp((static_cast<double>(key[i]) - top) / temperature) : 0.0;
    double inclusive, tile_total;
    Scan(temp.scan).InclusiveSum(p, inclusive, tile_total);  // tile_total reaches every thread
    if (i < k) s[i] = carry + inclusive;
    carry += tile_total;
    __syncthreads();  // temp is reused; and s is read by other threads below
  }
  const double total = carry;
  // Nucleus: the shortest prefix whose share of the total reaches top_p (all k if none does).
  const int64_t keep =
      first_index(k, k - 1, [&](int64_t i) { return s[i] / total >= top_p; }, temp.reduce, shared_first) + 1;
  const double threshold = u[r] * s[keep - 1];
  const int64_t pick =
      first_index(keep, keep - 1, [&](int64_t i) { return s[i] > threshold; }, temp.reduce, shared_first);
  if (threadIdx.x == 0) out[r] = sorted_ids[r * vocab + pick];
}

template <class T>
void sample_sorted(const Tensor& logits, const Tensor& u, const SamplingParams& params, const Tensor& out, int device,
                   cudaStream_t stream) {
  const char* op = "sample_tokens";
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  const int64_t n = rows * vocab;
  // CUB's segmented sort counts items and offsets in int.
  LINEA_CHECK(n <= INT_MAX, op, "logits ", logits.describe(), " hold more than 2^31 - 1 elements, which the GPU's "
              "sort cannot index; sample fewer rows at a time");
  const size_t count = static_cast<size_t>(n);
  DeviceBuffer keys_in(count * sizeof(T), device), keys_out(count * sizeof(T), device);
  DeviceBuffer ids_in(count * sizeof(int), device), ids_out(count * sizeof(int), device);
  DeviceBuffer offsets((rows + 1) * sizeof(int), device), poisoned(rows * sizeof(int), device);
  DeviceBuffer sums(count * sizeof(double), device);
  LINEA_CUDA_CHECK(cudaMemsetAsync(poisoned.as<int>(), 0, rows * sizeof(int), stream), op);
  prepare_kernel<T><<<blocks_for(n, device), kThreads, 0, stream>>>(
      logits.data<T>(), logits.stride(0), rows, vocab, keys_in.as<T>(), ids_in.as<int>(), poisoned.as<int>(),
      offsets.as<int>());
  LINEA_CUDA_LAUNCH_CHECK(op, "logits ", logits.describe());

  const int items = static_cast<int>(n), segments = static_cast<int>(rows);
  size_t temp_bytes = 0;
  LINEA_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
                       nullptr, temp_bytes, keys_in.as<T>(), keys_out.as<T>(), ids_in.as<int>(), ids_out.as<int>(),
                       items, segments, offsets.as<int>(), offsets.as<int>() + 1, 0, int(sizeof(T) * 8), stream),
                   op, "sort size query for ", logits.describe());
  // A null pointer would make the second call a size query again.
  DeviceBuffer temp(temp_bytes > 0 ? temp_bytes : 1, device);
  LINEA_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
                       temp.as<void>(), temp_bytes, keys_in.as<T>(), keys_out.as<T>(), ids_in.as<int>(),
                       ids_out.as<int>(), items, segments, offsets.as<int>(), offsets.as<int>() + 1, 0,
                       int(sizeof(T) * 8), stream),
                   op, "sorting ", logits.describe());

  const int64_t k = params.top_k > 0 ? std::min(params.top_k, vocab) : vocab;
  draw_kernel<T><<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      keys_out.as<T>(), ids_out.as<int>(), poisoned.as<int>(), u.data<double>(), vocab, k, params.temperature,
      params.top_p, sums.as<double>(), out.data<int64_t>());
  LINEA_CUDA_LAUNCH_CHECK(op, "logits ", logits.describe());
}

}  // namespace

void CudaBackend::sample_tokens(const Tensor& logits, const Tensor& u, const SamplingParams& params,
                                const Tensor& out) const {
  const char* op = "sample_tokens";
  check_on_device(device_, op, {&logits, &u, &out});
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  if (rows == 0) return;
  LINEA_CHECK(rows <= INT_MAX, op, "too many rows for one grid: ", logits.describe());
  LINEA_CHECK(vocab <= INT_MAX, op, "ids past the int range: ", logits.describe());
  const cudaStream_t stream = use_device(device_);
  dispatch_floating(logits.dtype(), op, [&]<class T>() {
    if (params.temperature == 0.0) {
      launch_overlapped(greedy_kernel<T>, dim3(static_cast<unsigned>(rows)), kRowThreads, 0, device_, stream, op,
                        logits.data<T>(), logits.stride(0), vocab, out.data<int64_t>());
    } else {
      sample_sorted<T>(logits, u, params, out, device_, stream);
    }
  });
}

}  // namespace linea::cuda
