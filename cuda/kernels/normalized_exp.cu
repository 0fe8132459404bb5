// ReGLA's normalized exponential feature map, forward and backward (tensor/backend.h:
// normalized_exp), one launch each, against the CPU oracle (tensor/cpu/normalized_exp.cpp).
//
// RowMax (queries): a warp per row (b, h, t), its lanes over the d features (rows.cuh's one-warp
//   RowGroup): the row's max by a butterfly, then y = scale exp(x - m) in a second pass over the
//   row, which L1 still holds. Backward: sum_c y dy by a butterfly, the max's column found again
//   by a ballot (the first lane whose x equals m), dx written once.
// PrefixMax (keys): a block of kSeqThreads threads per (b, h) sequence, in three phases split by
//   barriers: (1) the warps take rows in turn and write each row's max into m; (2) the block scans
//   m in place, kSeqThreads rows at a time, the running max carried from tile to tile (starting
//   from previous); (3) the warps take the rows again for y. A sequence's rows are read twice;
//   the second read mostly hits L2 (T d = 64K elements, 256 KB in float32, at T = 1024, d = 64).
//   Backward: (1) the warps write dx = y dy and g_t = dm_t - sum_c y dy (into scratch memory);
//   (2) the block sums the g_t of each stretch of rows that share one running max, backwards in
//   time, as a segmented scan (a segment ends at each row that raised the max), and the row that
//   raised it adds its stretch's sum at its max's column, found by searching the row for the
//   value. What reaches the first row without it raising the max goes to previous.
//
// Where each max came from is not saved by the forward: the backward recovers it exactly from the
// saved values (a max is one of the elements; row t raised the running max when m_t > m_{t-1}).
// That costs a search of the rows that raised the max, few once it settles, instead of an int
// tensor the size of x or m kept alive from forward to backward.
//
// One block per sequence leaves most of a GPU idle when B H is small (below the SM count): a scan
// split across blocks needs a second launch or flags between blocks, and the layers' B H is
// usually larger. Deterministic: every sum runs in a fixed order (butterflies, and a scan tree of
// fixed shape); no atomics.
#include <limits>

#include "cuda/buffer.h"
#include "cuda/kernels/rows.cuh"
#include "tensor/sequence_rows.h"

namespace linea::cuda {

namespace {

using Warp = RowGroup<32>;  // one warp per row, 8 rows per block

constexpr int kSeqThreads = 512;  // per sequence (PrefixMax)
constexpr int kSeqWarps = kSeqThreads / 32;

template <class T>
__device__ __forceinline__ T lowest() {
  return -std::numeric_limits<T>::infinity();
}

// The max of row[0..d), d >= 1, across the warp's lanes (NaN if one is); every lane gets it.
template <class T>
__device__ T warp_row_max(const T* row, int d, int lane) {
  T best = lowest<T>();
  for (int c = lane; c < d; c += 32) best = scalar::max_nan(best, row[c]);
  return warp_max(best);
}

// The first c < d with row[c] == value (NaN matching NaN), 32 columns per ballot; d when none.
template <class T>
__device__ int warp_first_holding(const T* row, int d, T value, int lane) {
  for (int c0 = 0; c0 < d; c0 += 32) {
    const int c = c0 + lane;
    const unsigned hits = __ballot_sync(0xffffffffu, c < d && scalar::same_value(row[c], value));
    if (hits != 0) return c0 + __ffs(static_cast<int>(hits)) - 1;
  }
  return d;
}

template <class T>
__device__ void exp_row(const T* x, T* y, int d, T m, T scale, int lane) {
  for (int c = lane; c < d; c += 32) y[c] = scale * exp(x[c] - m);
}

// ---- a scan over a sequence's rows, one element per thread, a tile of kSeqThreads at a time ----

// A sum that restarts at each head: step(earlier, later) keeps later's value at a head.
template <class T>
struct Segment {
  T value;
  int head;
};

template <class T>
__device__ __forceinline__ T shuffle_up(T v, int offset) {
  return __shfl_up_sync(0xffffffffu, v, offset);
}
template <class T>
__device__ __forceinline__ Segment<T> shuffle_up(Segment<T> v, int offset) {
  return {__shfl_up_sync(0xffffffffu, v.value, offset), __shfl_up_sync(0xffffffffu, v.head, offset)};
}

// The running max: the later value takes over only when strictly greater (scalar::takes_over).
struct MaxStep {
  template <class T>
  __device__ T operator()(T earlier, T later) const {
    return scalar::takes_over(later, earlier) ? later : earlier;
  }
};

struct SegmentStep {
  template <class T>
  __device__ Segment<T> operator()(Segment<T> earlier, Segment<T> later) const {
    return {later.head ? later.value : earlier.value + later.value, earlier.head | later.head};
  }
};

// What a tile-by-tile scan keeps in shared memory: each warp's total, and the result so far.
template <class V>
struct ScanShared {
  V warp_total[kSeqWarps];
  V carry;
};

// Inclusive scan of one tile, thread i holding element i, under an associative step(earlier,
// later), continued from scan.carry (everything before the tile), which it then moves to the
// tile's last result. Every thread of the block calls it, the same number of times; the carry a
// thread sets before the first call is read only after the call's first barrier.
template <class V, class Step>
__device__ V scan_tile(V v, ScanShared<V>& scan, Step step) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const V earlier = shuffle_up(v, offset);
    if (lane >= offset) v = step(earlier, v);
  }
  if (lane == 31) scan.warp_total[warp] = v;
  __syncthreads();
  V before = scan.carry;
  for (int w = 0; w < warp; ++w) before = step(before, scan.warp_total[w]);
  v = step(before, v);
  __syncthreads();  // every thread has read the carry and the totals
  if (threadIdx.x == kSeqThreads - 1) scan.carry = v;
  return v;
}

// ---- RowMax ----

template <class T>
__global__ void __launch_bounds__(Warp::kBlockThreads)
    row_max_kernel(const T* x, T* y, T* m, SequenceRows xr, SequenceRows yr, int64_t rows, int64_t length, int d,
                   T scale) {
  const int lane = Warp::lane();
  for (int64_t r = Warp::first_row(); r < rows; r += Warp::row_step()) {
    const int64_t seq = r / length, t = r % length;
    const T* row = x + xr.at(seq, t);
    const T best = warp_row_max(row, d, lane);
    exp_row(row, y + yr.at(seq, t), d, best, scale, lane);
    if (lane == 0) m[r] = best;
  }
}

// forward was y = scale exp(x - m), m the row's max: dx = y dy, plus g = dm - sum_c y dy at the
// max's column.
template <class T>
__global__ void __launch_bounds__(Warp::kBlockThreads)
    row_max_backward_kernel(const T* x, const T* y, const T* m, const T* dy, const T* dm, T* dx, SequenceRows xr,
                            SequenceRows yr, SequenceRows dyr, SequenceRows dxr, int64_t rows, int64_t length, int d) {
  const int lane = Warp::lane();
  for (int64_t r = Warp::first_row(); r < rows; r += Warp::row_step()) {
    const int64_t seq = r / length, t = r % length;
    const T* yrow = y + yr.at(seq, t);
    const T* dyrow = dy + dyr.at(seq, t);
    T* dxrow = dx + dxr.at(seq, t);
    T dot = 0;
    for (int c = lane; c < d; c += 32) dot += yrow[c] * dyrow[c];
    const T g = dm[r] - warp_sum(dot);
    const int at = warp_first_holding(x + xr.at(seq, t), d, m[r], lane);
    for (int c = lane; c < d; c += 32) {
      const T p = yrow[c] * dyrow[c];
      dxrow[c] = c == at ? p + g : p;
    }
  }
}

// ---- PrefixMax ----

template <class T>
__global__ void __launch_bounds__(kSeqThreads)
    prefix_max_kernel(const T* x, T* y, T* m, const T* previous, SequenceRows xr, SequenceRows yr, int64_t sequences,
                      int64_t length, int d, T scale) {
  __shared__ ScanShared<T> scan;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t seq = blockIdx.x; seq < sequences; seq += gridDim.x) {
    T* ms = m + seq * length;
    for (int64_t t = warp; t < length; t += kSeqWarps) {
      const T best = warp_row_max(x + xr.at(seq, t), d, lane);
      if (lane == 0) ms[t] = best;
    }
    if (threadIdx.x == 0) scan.carry = previous != nullptr ? previous[seq] : lowest<T>();
    __syncthreads();  // every row's max is in m
    for (int64_t t0 = 0; t0 < length; t0 += kSeqThreads) {
      const int64_t t = t0 + threadIdx.x;
      const T running = scan_tile(t < length ? ms[t] : lowest<T>(), scan, MaxStep{});
      if (t < length) ms[t] = running;
    }
    __syncthreads();  // the running maxima are in m, and the scan's shared memory is free again
    for (int64_t t = warp; t < length; t += kSeqWarps)
      exp_row(x + xr.at(seq, t), y + yr.at(seq, t), d, ms[t], scale, lane);
  }
}

// forward was y_t = scale exp(x_t - m_t), m_t the running max, so dx_t = y_t dy_t and
// g_t = dm_t - sum_c y_t,c dy_t,c goes to where m_t came from: the sum of g over a stretch of rows
// that share one running max goes to the row that raised it (or to previous). `owed` is scratch
// memory for the g_t, one per row.
template <class T>
__global__ void __launch_bounds__(kSeqThreads)
    prefix_max_backward_kernel(const T* x, const T* y, const T* m, const T* previous, const T* dy, const T* dm, T* dx,
                               T* dprevious, T* owed, SequenceRows xr, SequenceRows yr, SequenceRows dyr,
                               SequenceRows dxr, int64_t sequences, int64_t length, int d) {
  __shared__ ScanShared<Segment<T>> scan;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t seq = blockIdx.x; seq < sequences; seq += gridDim.x) {
    const T* ms = m + seq * length;
    T* gs = owed + seq * length;
    for (int64_t t = warp; t < length; t += kSeqWarps) {
      const T* yrow = y + yr.at(seq, t);
      const T* dyrow = dy + dyr.at(seq, t);
      T* dxrow = dx + dxr.at(seq, t);
      T dot = 0;
      for (int c = lane; c < d; c += 32) {
        const T p = yrow[c] * dyrow[c];
        dxrow[c] = p;
        dot += p;
      }
      dot = warp_sum(dot);
      if (lane == 0) gs[t] = dm[seq * length + t] - dot;
    }
    if (threadIdx.x == 0) scan.carry = Segment<T>{T(0), 0};
    __syncthreads();  // dx = y dy and every g_t are written
    // Row t raised the running max (ties stay with the earlier row).
    auto raised = [&](int64_t t) {
      return t > 0 ? scalar::takes_over(ms[t], ms[t - 1])
                   : previous == nullptr || scalar::takes_over(ms[0], previous[seq]);
    };
    // Element j of the scan is row length - 1 - j; a segment starts after each row that raised the
    // max, so at such a row the scan holds the sum of g over the rows it owns.
    for (int64_t j0 = 0; j0 < length; j0 += kSeqThreads) {
      const int64_t j = j0 + threadIdx.x, t = length - 1 - j;
      Segment<T> v{T(0), 0};
      if (j < length) v = {gs[t], j == 0 || raised(t + 1)};
      v = scan_tile(v, scan, SegmentStep{});
      if (j >= length) continue;
      if (raised(t)) {
        const T* xrow = x + xr.at(seq, t);
        for (int c = 0; c < d; ++c)
          if (scalar::same_value(xrow[c], ms[t])) {
            dx[dxr.at(seq, t) + c] += v.value;
            break;
          }
      }
      if (t == 0 && dprevious != nullptr) dprevious[seq] = raised(0) ? T(0) : v.value;
    }
    __syncthreads();  // the last tile's carry is written before the next sequence resets it
  }
}

// Blocks for the per-sequence kernels: one per sequence, at most as many as the SMs hold at once
// (a block then takes several sequences in turn).
unsigned sequence_blocks(int64_t sequences, int device) {
  const int64_t cap = static_cast<int64_t>(sm_count(device)) * (2048 / kSeqThreads);
  return static_cast<unsigned>(sequences < cap ? sequences : cap);
}

// A (B, H, T, d) input as the kernels take it: B H sequences of T rows of d features.
struct MapSizes {
  int64_t sequences, length;
  int features;
  int64_t rows() const { return sequences * length; }
};

MapSizes map_sizes(const Tensor& x, const char* op) {
  LINEA_CHECK(x.size(3) < (int64_t{1} << 30), op, "at most 2^30 features per row, got ", x.describe());
  return {x.size(0) * x.size(1), x.size(2), static_cast<int>(x.size(3))};
}

template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

void CudaBackend::normalized_exp(const Tensor& x, NormalizedExpMode mode, double scale, const Tensor& previous,
                                 const Tensor& y, const Tensor& m) const {
  const char* op = "normalized_exp";
  check_on_device(device_, op, {&x, &previous, &y, &m});
  const MapSizes n = map_sizes(x, op);
  if (n.rows() == 0) return;
  const cudaStream_t stream = use_device(device_);
  dispatch_floating(x.dtype(), op, [&]<class T>() {
    if (mode == NormalizedExpMode::RowMax) {
      row_max_kernel<T><<<row_blocks<32>(n.rows(), device_), Warp::kBlockThreads, 0, stream>>>(
          x.data<T>(), y.data<T>(), m.data<T>(), sequence_rows(x), sequence_rows(y), n.rows(), n.length, n.features,
          static_cast<T>(scale));
    } else {
      prefix_max_kernel<T><<<sequence_blocks(n.sequences, device_), kSeqThreads, 0, stream>>>(
          x.data<T>(), y.data<T>(), m.data<T>(), data_or_null<T>(previous), sequence_rows(x), sequence_rows(y),
          n.sequences, n.length, n.features, static_cast<T>(scale));
    }
    LINEA_CUDA_LAUNCH_CHECK(op, x.describe());
  });
}

void CudaBackend::normalized_exp_backward(const Tensor& x, const Tensor& y, const Tensor& m, const Tensor& previous,
                                          const Tensor& dy, const Tensor& dm, NormalizedExpMode mode,
                                          const Tensor& dx, const Tensor& dprevious) const {
  const char* op = "normalized_exp_backward";
  check_on_device(device_, op, {&x, &y, &m, &previous, &dy, &dm, &dx, &dprevious});
  const MapSizes n = map_sizes(x, op);
  if (n.rows() == 0) return;
  const cudaStream_t stream = use_device(device_);
  dispatch_floating(x.dtype(), op, [&]<class T>() {
    if (mode == NormalizedExpMode::RowMax) {
      row_max_backward_kernel<T><<<row_blocks<32>(n.rows(), device_), Warp::kBlockThreads, 0, stream>>>(
          x.data<T>(), y.data<T>(), m.data<T>(), dy.data<T>(), dm.data<T>(), dx.data<T>(), sequence_rows(x),
          sequence_rows(y), sequence_rows(dy), sequence_rows(dx), n.rows(), n.length, n.features);
    } else {
      const DeviceBuffer owed(static_cast<size_t>(n.rows()) * sizeof(T), device_);
      prefix_max_backward_kernel<T><<<sequence_blocks(n.sequences, device_), kSeqThreads, 0, stream>>>(
          x.data<T>(), y.data<T>(), m.data<T>(), data_or_null<T>(previous), dy.data<T>(), dm.data<T>(), dx.data<T>(),
          data_or_null<T>(dprevious), owed.as<T>(), sequence_rows(x), sequence_rows(y), sequence_rows(dy),
          sequence_rows(dx), n.sequences, n.length, n.features);
    }
    LINEA_CUDA_LAUNCH_CHECK(op, x.describe());
  });
}

}  // namespace linea::cuda
