// Softmax attention's decoding token over a KV cache kept in place (tensor/backend_kernels.def:
// cached_attention_step; cpu/cached_attention.cpp is the oracle). One query row per (batch,
// head) against up to C cached columns: at batch 1 that is 8 rows of work, far too few blocks to
// read a long cache at the GPU's bandwidth. So the columns are split (FlashDecoding, Dao et al.
// 2023): grid (B H, splits), each block an online softmax over its share of the columns, kept as
// (max, sum, weighted values); a second kernel merges a row's splits in split order. The split
// count depends on the cache's capacity, never on the positions, so a CUDA graph can replay the
// step at any position: blocks whose columns are not yet seen exit after writing an empty part.
// cached_attention_projected, at batch 1, leaves the merge to the output projection's kernel
// instead (cuda/kernels/attention_splits.h), which also advances the position; the split kernel
// then writes how many splits hold seen columns. (Merging in the split kernel, by the last block
// of a row to finish, counted with atomics between fences, made the softmax step slower:
// docs/benchmarks.md.)
//
// The block whose columns hold the new token's column writes the rotated key and the value
// there (the first query head of each K/V head, so each column is written once), and every block
// reads that column from the inputs rather than from the cache: no block waits on another. The
// merge (or the product) advances the positions, after every read of them.
//
// Each warp takes runs of adjacent columns, loading a run's keys and values together so that the
// loads are in flight at once, and rescales its online softmax once per run; a lane holds dims
// lane, lane + 32, ... of the query, of the run's rows and of its accumulators. The first run is
// loaded before the kernel waits for the one before it (cached_split_kernel says why it may).
// Every reduction combines in a fixed order: the same input gives the same bits on every run.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cuda/buffer.h"
#include "cuda/kernels/attention_splits.h"
#include "cuda/kernels/rows.cuh"
#include "tensor/creation.h"
#include "tensor/scalar_math.h"

namespace linea::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kSplitThreads = 32 * kWarps;
constexpr int kMaxHeadDim = 256;
constexpr int64_t kMinColumnsPerSplit = 64;

template <class T>
struct CachedArgs {
  const T *q, *k, *v, *cos, *sin;
  int64_t q_stride, k_stride, v_stride;  // between batch rows of q, k, v (each row's heads are dense)
  const int64_t* positions;
  int* live;  // (B) or null: the splits holding seen columns, for a product that merges them
  T *cache_k, *cache_v;
  T* part_max;  // (B H, splits): the running max of a split's scores (NaN: past the tables)
  T* part_sum;  // (B H, splits): its sum of exp(score - max)
  T* part_acc;      // (B H, splits, dh): its sum of exp(score - max) v
  int64_t heads, group, columns, dh, half, table, per_split;
  int splits;
  T scale;
};

// The rotation's cos and sin at table row `row`, one pair per thread (threads striding over the
// pairs), into shared memory: the tables are parameters, so they are loaded before the wait.
template <class T>
__device__ void load_rotation(const CachedArgs<T>& a, int64_t row, T* cos_row, T* sin_row) {
  for (int64_t i = threadIdx.x; i < a.half; i += blockDim.x) {
    cos_row[i] = a.cos[row * a.half + i];
    sin_row[i] = a.sin[row * a.half + i];
  }
}

// x rotated by the staged cos and sin into y in shared memory, threads striding over the dims.
template <class T>
__device__ void rotate_into(const T* x, const CachedArgs<T>& a, const T* cos_row, const T* sin_row, T* y, T factor) {
  for (int64_t i = threadIdx.x; i < a.dh; i += blockDim.x) {
    T value = x[i];
    if (i < 2 * a.half) {
      const int64_t pair = i < a.half ? i : i - a.half;
      T y1, y2;
      scalar::rotate_pair(x[pair], x[pair + a.half], cos_row[pair], sin_row[pair], y1, y2);
      value = i < a.half ? y1 : y2;
    }
    y[i] = value * factor;
  }
}

// A run of kColumns adjacent cached columns from j0 (those before `last`), a lane's dims of each
// row's key and value, into registers.
template <class T, int kPerLane, int kColumns>
__device__ __forceinline__ void load_run(const CachedArgs<T>& a, int64_t base, int64_t j0, int64_t last,
                                         T (&key)[kColumns][kPerLane], T (&value)[kColumns][kPerLane]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int c = 0; c < kColumns; ++c) {
    const int64_t j = j0 + c;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const bool here = j < last && lane + 32 * i < a.dh;
      key[c][i] = here ? a.cache_k[(base + j) * a.dh + lane + 32 * i] : T(0);
      value[c][i] = here ? a.cache_v[(base + j) * a.dh + lane + 32 * i] : T(0);
    }
  }
}

// Which of a split's columns a row reads at position p.
struct SplitColumns {
  int64_t first, last;  // [first, last): the split's columns the row has seen
  int64_t column_new;   // where the token at p goes
  bool past_tables;     // p is past the rotation's tables: the row is NaN
  __device__ bool empty() const { return first >= last || past_tables; }
};

template <class T>
__device__ __forceinline__ SplitColumns split_columns(const CachedArgs<T>& a, int64_t p, int split) {
  const int64_t seen = p + 1 < a.columns ? p + 1 : a.columns, first = split * a.per_split;
  return {first, first + a.per_split < seen ? first + a.per_split : seen, p % a.columns, a.half > 0 && p >= a.table};
}

template <class T>
__device__ __forceinline__ int64_t position_of(const CachedArgs<T>& a, int64_t b) {
  return a.positions[b] > 0 ? a.positions[b] : 0;
}

// kPerLane: dims of a head per lane (dh <= 32 kPerLane); kColumnsAtOnce: the columns a warp
// loads together (their keys and values: 64 registers of float), fewer for wider heads.
//
// Only q and the new token's key and value are the kernel before's output (the q, k, v product).
// The rotation tables are parameters, and the cached columns were written by earlier steps. So
// the kernel reads them before its wait, while that product still runs, and each warp's first run
// of keys and values is in registers when the wait returns. Which columns and which table row
// depend on the position, which this layer's merge advanced a step ago: it is read before the
// wait as a guess and again after it, and where the two differ (the merge was the kernel just
// before, as when a caller steps twice with the same q, k and v) the loads are done again.
template <class T, int kPerLane>
__global__ void __launch_bounds__(kSplitThreads) cached_split_kernel(CachedArgs<T> a) {
  constexpr int kColumnsAtOnce = static_cast<int>(128 / sizeof(T)) / kPerLane;
  extern __shared__ unsigned char shared_bytes[];
  T* q = reinterpret_cast<T*>(shared_bytes);  // the rotated, scaled query (dh)
  T* k_new = q + a.dh;                        // the new token's rotated key (dh)
  T* warp_max = k_new + a.dh;
  T* warp_sum_of = warp_max + kWarps;
  T* warp_acc = warp_sum_of + kWarps;     // (kWarps, dh)
  T* cos_row = warp_acc + kWarps * a.dh;  // (half): the table rows at the position
  T* sin_row = cos_row + a.half;          // (half)

  const int64_t row = blockIdx.x, b = row / a.heads, h = row % a.heads, kv = h / a.group;
  const int split = static_cast<int>(blockIdx.y);
  const int64_t base = (b * (a.heads / a.group) + kv) * a.columns;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  T key[kColumnsAtOnce][kPerLane], value[kColumnsAtOnce][kPerLane];
  // Warp w takes runs of kColumnsAtOnce adjacent columns, every kWarps-th run.
  auto load_ahead = [&](int64_t p, const SplitColumns& s) {
    if (s.empty()) return;
    if (a.half > 0) load_rotation(a, p, cos_row, sin_row);
    load_run(a, base, s.first + warp * kColumnsAtOnce, s.last, key, value);
  };
  const int64_t guess = position_of(a, b);
  load_ahead(guess, split_columns(a, guess, split));
  wait_for_prior_kernels();  // launched overlapped (cuda/launch.cuh)
  const int64_t p = position_of(a, b);
  const SplitColumns s = split_columns(a, p, split);
  if (p != guess) load_ahead(p, s);
  const int64_t part = row * a.splits + split;
  if (a.live && h == 0 && split == 0 && threadIdx.x == 0) {
    const int64_t seen = p + 1 < a.columns ? p + 1 : a.columns;
    a.live[b] = s.past_tables ? 0 : static_cast<int>((seen + a.per_split - 1) / a.per_split);
  }
  if (s.empty()) {  // nothing to read here (NaN marks a row past the tables)
    if (threadIdx.x == 0) {
      a.part_max[part] = s.past_tables ? T(NAN) : T(-INFINITY);
      a.part_sum[part] = T(0);
    }
    for (int64_t d = threadIdx.x; d < a.dh; d += blockDim.x) a.part_acc[part * a.dh + d] = T(0);
    return;
  }
  const T* q_in = a.q + b * a.q_stride + h * a.dh;
  const T* k_in = a.k + b * a.k_stride + kv * a.dh;
  const T* v_in = a.v + b * a.v_stride + kv * a.dh;
  const bool holds_new = s.column_new >= s.first && s.column_new < s.last;
  __syncthreads();  // the rotation's rows are staged
  if (a.half > 0) {
    rotate_into(q_in, a, cos_row, sin_row, q, a.scale);
    if (holds_new) rotate_into(k_in, a, cos_row, sin_row, k_new, T(1));
  } else {
    for (int64_t d = threadIdx.x; d < a.dh; d += blockDim.x) {
      q[d] = q_in[d] * a.scale;
      if (holds_new) k_new[d] = k_in[d];
    }
  }
  __syncthreads();
  if (holds_new && h % a.group == 0)
    for (int64_t d = threadIdx.x; d < a.dh; d += blockDim.x) {
      a.cache_k[(base + s.column_new) * a.dh + d] = k_new[d];
      a.cache_v[(base + s.column_new) * a.dh + d] = v_in[d];
    }

  T q_lane[kPerLane], acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    q_lane[i] = d < a.dh ? q[d] : T(0);
    acc[i] = T(0);
  }
  T m = -INFINITY, sum = 0;
  const int64_t last = s.last, column_new = s.column_new;
  for (int64_t j0 = s.first + warp * kColumnsAtOnce; j0 < last; j0 += kWarps * kColumnsAtOnce) {
    if (holds_new && column_new >= j0 && column_new < j0 + kColumnsAtOnce) {
      // The new column, loaded from the cache before this kernel wrote it: from the inputs.
#pragma unroll
      for (int c = 0; c < kColumnsAtOnce; ++c)
        if (j0 + c == column_new)
#pragma unroll
          for (int i = 0; i < kPerLane; ++i)
            if (lane + 32 * i < a.dh) {
              key[c][i] = k_new[lane + 32 * i];
              value[c][i] = v_in[lane + 32 * i];
            }
    }
    T score[kColumnsAtOnce];
#pragma unroll
    for (int c = 0; c < kColumnsAtOnce; ++c) {
      T s = 0;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) s += q_lane[i] * key[c][i];
      score[c] = warp_sum(s);
    }
    // Online softmax over the run: rescale what was accumulated once, to the run's new max.
    T top = m;
#pragma unroll
    for (int c = 0; c < kColumnsAtOnce; ++c)
      if (j0 + c < last) top = fmax(top, score[c]);
    const T shrink = exp(m - top);
    sum *= shrink;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) acc[i] *= shrink;
#pragma unroll
    for (int c = 0; c < kColumnsAtOnce; ++c) {
      if (j0 + c >= last) break;
      const T w = exp(score[c] - top);  // a NaN score makes the row NaN, as on the CPU
      sum += w;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) acc[i] += w * value[c][i];
    }
    m = top;
    if (j0 + kWarps * kColumnsAtOnce < last) load_run(a, base, j0 + kWarps * kColumnsAtOnce, last, key, value);
  }
  // Merge the warps, in warp order. A warp with no columns, or whose scores were all NaN, has max
  // -inf: it weighs 0, and a NaN sum times 0 keeps the row NaN, as on the CPU (skipping such a
  // warp lost the NaN of a split whose every score was NaN).
  if (lane == 0) {
    warp_max[warp] = m;
    warp_sum_of[warp] = sum;
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (lane + 32 * i < a.dh) warp_acc[warp * a.dh + lane + 32 * i] = acc[i];
  __syncthreads();
  T block_max = -INFINITY;
  for (int w = 0; w < kWarps; ++w) block_max = fmax(block_max, warp_max[w]);
  T weight[kWarps];
  for (int w = 0; w < kWarps; ++w) weight[w] = warp_max[w] == -INFINITY ? T(0) : exp(warp_max[w] - block_max);
  T block_sum = 0;
  for (int w = 0; w < kWarps; ++w) block_sum += warp_sum_of[w] * weight[w];
  for (int64_t d = threadIdx.x; d < a.dh; d += blockDim.x) {
    T total = 0;
    for (int w = 0; w < kWarps; ++w) total += warp_acc[w * a.dh + d] * weight[w];
    a.part_acc[part * a.dh + d] = total;
  }
  if (threadIdx.x == 0) {
    a.part_max[part] = block_max;
    a.part_sum[part] = block_sum;
  }
}

constexpr int kMergeThreads = 256;
constexpr int kMergeChunk = 16;  // the splits a merging thread loads at once

// One block per (batch, head) merges the row's splits. The splits are shared among groups of dh
// threads, a thread per dim, each group taking every groups-th split. A thread loads 16 splits'
// max, sum and its dim's weighted values at once (one trip to memory for up to 16 x groups
// splits: 64 at the standard head) and folds them into its own online softmax; then the groups'
// results meet in shared memory, added in group order after one barrier. (Taking the maxima, the
// weights and the values in three rounds with four barriers, the node added 3.14 - 3.26 us to a
// decoding step per layer; now 2.91 - 2.98 on the H200.) Then the first head's block advances the
// row's position (the split kernel, which read it, has finished).
template <class T>
__global__ void __launch_bounds__(kMergeThreads) cached_merge_kernel(CachedArgs<T> a, T* out, int64_t* positions) {
  extern __shared__ unsigned char shared_bytes[];
  const int dh = static_cast<int>(a.dh), groups = kMergeThreads / dh;
  T* group_max = reinterpret_cast<T*>(shared_bytes);  // (groups)
  T* group_sum = group_max + groups;                   // (groups)
  T* group_acc = group_sum + groups;                   // (groups, dh)
  const int64_t row = blockIdx.x;
  const int t = threadIdx.x, group = t / dh, d = t % dh;
  wait_for_prior_kernels();  // launched overlapped: the split kernel's partials
  bool nan_seen = false;
  if (group < groups) {
    T m = -INFINITY, sum = 0, acc = 0;
    for (int first = group; first < a.splits; first += kMergeChunk * groups) {
      T mx[kMergeChunk], split_sum[kMergeChunk], value[kMergeChunk];
#pragma unroll
      for (int i = 0; i < kMergeChunk; ++i) {
        const int64_t part = row * a.splits + first + i * groups;
        const bool here = first + i * groups < a.splits;
        mx[i] = here ? a.part_max[part] : T(-INFINITY);
        split_sum[i] = here ? a.part_sum[part] : T(0);
        value[i] = here ? a.part_acc[part * dh + d] : T(0);
      }
      T top = m;
#pragma unroll
      for (int i = 0; i < kMergeChunk; ++i) {
        nan_seen = nan_seen || isnan(mx[i]);
        top = fmax(top, mx[i]);
      }
      const T shrink = m == -INFINITY ? T(0) : exp(m - top);  // (nothing accumulated yet: 0)
      sum *= shrink;
      acc *= shrink;
#pragma unroll
      for (int i = 0; i < kMergeChunk; ++i) {
        const T w = mx[i] == -INFINITY ? T(0) : exp(mx[i] - top);  // an empty split weighs nothing
        sum += split_sum[i] * w;
        acc += value[i] * w;
      }
      m = top;
    }
    if (d == 0) {
      group_max[group] = m;
      group_sum[group] = sum;
    }
    group_acc[group * dh + d] = acc;
  }
  const bool poisoned = __syncthreads_or(nan_seen);  // a split past the tables makes the row NaN
  if (t < dh) {
    T top = -INFINITY;
    for (int g = 0; g < groups; ++g) top = fmax(top, group_max[g]);
    T total = 0, value = 0;
    for (int g = 0; g < groups; ++g) {
      if (group_max[g] == -INFINITY) continue;
      const T w = exp(group_max[g] - top);
      total += group_sum[g] * w;
      value += group_acc[g * dh + t] * w;
    }
    out[row * dh + t] = poisoned ? T(NAN) : value / total;
  }
  if (row % a.heads == 0 && t == 0) {
    const int64_t b = row / a.heads;
    positions[b] = (positions[b] > 0 ? positions[b] : 0) + 1;
  }
}

// How a step's columns are split: enough blocks to fill the GPU eight times over, but no split
// shorter than kMinColumnsPerSplit. It depends on the cache's capacity, never on the positions.
struct SplitPlan {
  int64_t splits, per_split;
};
SplitPlan plan_splits(int64_t rows, int64_t columns, int device) {
  const int64_t wanted = ceil_div(8 * static_cast<int64_t>(sm_count(device)), rows);
  const int64_t splits = std::max<int64_t>(1, std::min(wanted, ceil_div(columns, kMinColumnsPerSplit)));
  return {splits, ceil_div(columns, splits)};
}

// The split kernel's results: each split's max, sum and weighted values, rows x splits of each.
template <class T>
struct SplitParts {
  SplitParts(int64_t rows, const SplitPlan& plan, int64_t dh, int device)
      : max(rows * plan.splits * sizeof(T), device), sum(rows * plan.splits * sizeof(T), device),
        acc(rows * plan.splits * dh * sizeof(T), device) {}
  DeviceBuffer max, sum, acc;
};

// The split kernel's arguments for the step's tensors, its results into `parts`.
template <class T>
CachedArgs<T> split_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& positions, const Tensor& cos,
                         const Tensor& sin, double scale, const Tensor& cache_k, const Tensor& cache_v,
                         const SplitPlan& plan, const SplitParts<T>& parts) {
  CachedArgs<T> a{};
  a.q = q.data<T>();
  a.q_stride = q.stride(0);
  a.k_stride = k.stride(0);
  a.v_stride = v.stride(0);
  a.k = k.data<T>();
  a.v = v.data<T>();
  a.cos = data_or_null<T>(cos);
  a.sin = data_or_null<T>(sin);
  a.positions = positions.data<int64_t>();
  a.cache_k = cache_k.data<T>();
  a.cache_v = cache_v.data<T>();
  a.part_max = parts.max.template as<T>();
  a.part_sum = parts.sum.template as<T>();
  a.part_acc = parts.acc.template as<T>();
  a.heads = q.size(1);
  a.group = q.size(1) / cache_k.size(1);
  a.columns = cache_k.size(2);
  a.dh = q.size(2);
  a.half = cos.defined() ? cos.size(1) : 0;
  a.table = cos.defined() ? cos.size(0) : 0;
  a.per_split = plan.per_split;
  a.splits = static_cast<int>(plan.splits);
  a.scale = static_cast<T>(scale);
  return a;
}

template <class T>
void launch_splits(const CachedArgs<T>& a, int64_t rows, int device, cudaStream_t stream, const char* op) {
  const size_t bytes = sizeof(T) * (2 * a.dh + kWarps * a.dh + 2 * kWarps + 2 * a.half);
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(a.splits));
  auto split_kernel = a.dh <= 64    ? cached_split_kernel<T, 2>
                      : a.dh <= 128 ? cached_split_kernel<T, 4>
                                    : cached_split_kernel<T, 8>;
  launch_overlapped(split_kernel, grid, kSplitThreads, bytes, device, stream, op, a);
}

void check_step_sizes(int64_t rows, int64_t dh, const char* op) {
  LINEA_CHECK(dh <= kMaxHeadDim, op, "the CUDA kernel takes head dims up to ", kMaxHeadDim, ", got ", dh);
  LINEA_CHECK(rows <= INT32_MAX, op, "too many (batch, head) pairs: ", rows);
}

}  // namespace

void CudaBackend::cached_attention_step(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& positions,
                                        const Tensor& cos, const Tensor& sin, double scale, const Tensor& cache_k,
                                        const Tensor& cache_v, const Tensor& out) const {
  const char* op = "cached_attention_step";
  check_on_device(device_, op, {&q, &k, &v, &positions, &cos, &sin, &cache_k, &cache_v, &out});
  const int64_t rows = q.size(0) * q.size(1), dh = q.size(2);
  check_step_sizes(rows, dh, op);
  const SplitPlan plan = plan_splits(rows, cache_k.size(2), device_);
  const cudaStream_t stream = use_device(device_);
  dispatch_floating(q.dtype(), op, [&]<class T>() {
    const SplitParts<T> parts(rows, plan, dh, device_);
    const CachedArgs<T> a = split_args<T>(q, k, v, positions, cos, sin, scale, cache_k, cache_v, plan, parts);
    launch_splits(a, rows, device_, stream, op);
    const size_t merge_bytes = sizeof(T) * (kMergeThreads / dh) * (dh + 2);  // each group's max, sum and values
    launch_overlapped(cached_merge_kernel<T>, dim3(static_cast<unsigned>(rows)), kMergeThreads, merge_bytes, device_,
                      stream, op, a, out.data<T>(), positions.data<int64_t>());
  });
}

void CudaBackend::cached_attention_projected(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const Tensor& positions, const Tensor& cos, const Tensor& sin,
                                             double scale, const Tensor& cache_k, const Tensor& cache_v,
                                             const FusedLinearInputs& projection, const Tensor& out) const {
  const char* op = "cached_attention_projected";
  check_on_device(device_, op,
                  {&q, &k, &v, &positions, &cos, &sin, &cache_k, &cache_v, &projection.weight, &projection.bias,
                   &projection.residual, &out});
  const int64_t batch = q.size(0), heads = q.size(1), dh = q.size(2), rows = batch * heads;
  check_step_sizes(rows, dh, op);
  const SplitPlan plan = plan_splits(rows, cache_k.size(2), device_);
  if (batch == 1 && q.dtype() == kFloat32 && takes_attention_splits(projection, heads, dh, plan.splits, device_)) {
    const cudaStream_t stream = use_device(device_);
    const SplitParts<float> parts(rows, plan, dh, device_);
    const DeviceBuffer live(sizeof(int), device_);
    CachedArgs<float> a = split_args<float>(q, k, v, positions, cos, sin, scale, cache_k, cache_v, plan, parts);
    a.live = live.as<int>();
    launch_splits(a, rows, device_, stream, op);
    const AttentionSplits splits{a.part_max, a.part_sum, a.part_acc, a.live, positions.data<int64_t>(),
                                 static_cast<int>(plan.splits), static_cast<int>(dh)};
    fused_linear_from_splits(projection, splits, out, device_);
    return;
  }
  FusedLinearInputs product = projection;
  product.x = empty({batch, heads * dh}, q.dtype(), q.device());
  cached_attention_step(q, k, v, positions, cos, sin, scale, cache_k, cache_v, product.x);  // writes rows of H dh
  fused_linear(product, FusedLinearOptions{}, out);
}

}  // namespace linea::cuda
