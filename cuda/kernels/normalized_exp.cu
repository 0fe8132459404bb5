// ReGLA's normalized exponential feature map, forward and backward (tensor/backend.h:
// normalized_exp), against the CPU oracle (cpu/normalized_exp.cpp). Every pass over the
// rows of x spreads them over the whole GPU; only the scans along time, over one scalar per row,
// go sequence by sequence.
//
// Row passes. Rows are short (d = 64 in ReGLA's heads), so a row goes to a team of `lanes` lanes
// of one warp, the smallest power of two (at most 32) that covers it with one load per lane, each
// load V consecutive features (16 bytes: 4 floats or 2 doubles; V = 1 when d, a row's start or a
// stride is not a multiple of that). At d = 64 in float32: 16 lanes of one float4 each, two rows
// per warp. A team holds kRowsPerTeam rows at a time, their loads issued before any reduction, so
// that enough bytes are in flight to keep the memory busy; in RowMax a row stays in registers
// from its max to its exps, so x is read once. (The earlier design ran at half the memory's bandwidth or less
// on an H100: a warp per row, a 4-byte load per lane, 256 bytes in flight per warp, and two 64-bit
// divisions per row and lane to find the row; which of these cost most was not measured.) Rows
// longer than 32 V are walked in segments of lanes V features, the later segments read again. A
// team reduces by a butterfly (xor offsets below `lanes` stay in it), and every lane of a warp
// runs every shuffle: the warp's loop bound is the same for all its lanes, and a row past the end
// is padded rather than skipped, so the full-warp masks always hold. A row's place (b, h, t)
// comes from 32-bit divisions (the host checks that there are fewer than 2^31 rows).
//
// RowMax (queries): one row pass: each row's max, then y = scale exp(x - m) from the registers.
//   Backward, one row pass: sum_c y dy by a butterfly, the max's column found again (the first
//   feature equal to m), dx = y dy plus g = dm - sum_c y dy at that column.
// PrefixMax (keys), forward in three launches:
//   (1) a row pass writes each row's own max into m;
//   (2) a block per (b, h) sequence scans m in place into the running max, kScanThreads rows at
//       a time, the max carried from tile to tile (starting from previous): T scalars per
//       sequence, mostly from L2, little next to the row passes;
//   (3) a row pass writes y = scale exp(x - m_t).
//   x is read twice. One read would need a block to wait for the row maxima of the blocks before
//   it (a decoupled look-back scan, flags between blocks); the second read costs a third of the
//   forward's traffic and keeps every kernel free of inter-block waits.
//   Backward in two launches:
//   (1) a row pass writes dx = y dy and g_t = dm_t - sum_c y dy (scratch), and for each row that
//       raised the running max (m_t > m_{t-1}, or m_0 > previous: ties stay with the earlier)
//       the column of its max, found by searching that row of x (the only rows of x it reads);
//   (2) a block per sequence sums the g_t over each stretch of rows that share one running max,
//       backwards in time, as a segmented scan (a segment ends at each row that raised the max);
//       the row that raised it adds its stretch's sum to dx at that column, and what reaches the
//       first row without it raising the max goes to previous.
//
// Where each max came from is not saved by the forward: the backward recovers it exactly from the
// saved values (a max is one of the elements; row t raised the running max when m_t > m_{t-1}).
// That costs a search of the rows that raised the max, few once it settles, instead of an int
// tensor the size of m kept alive from forward to backward.
//
// The maxima are the CPU's to the bit. Both take them in feature order, then time order, a later
// value taking over only when strictly greater or a NaN (scalar::takes_over): the first of equal
// values wins (-0 and +0 stay as they came) and the first NaN. A butterfly keeps that order by
// going up from offset 1, so that each lane always holds an aligned run of lanes and merges it
// with its neighbour's as earlier or later. Deterministic: every sum runs in a fixed order
// (butterflies, a scan tree of fixed shape); no atomics (one thread patches each raised row).
#include <climits>
#include <cstdint>
#include <limits>

#include "cuda/buffer.h"
#include "cuda/kernels/rows.cuh"
#include "tensor/sequence_rows.h"

namespace linea::cuda {

namespace {

constexpr unsigned kAllLanes = 0xffffffffu;
constexpr int kRowThreads = 256;   // per block, in the row passes
constexpr int kRowsPerTeam = 2;    // rows a team holds at once (loads in flight)
constexpr int kScanThreads = 512;  // per sequence, in the scans along time
constexpr int kScanWarps = kScanThreads / 32;

template <class T>
__device__ __forceinline__ T lowest() {
  return -std::numeric_limits<T>::infinity();
}

// One step of a running max (scalar::takes_over): ties keep the earlier value.
template <class T>
__device__ __forceinline__ T keep_max(T earlier, T later) {
  return scalar::takes_over(later, earlier) ? later : earlier;
}

// ---- the row passes: where a row lies, and a team of lanes per row ----

// The B H T rows of x: row r = (b H + h) T + t, each of `features` features. Fewer than 2^31.
struct RowCount {
  uint32_t rows, length, heads;
  int features;
};

// Row r's place: its sequence (b, h) and position t. A row past the end (valid false) stands in
// as row 0 with nothing read or written.
struct RowAt {
  uint32_t r, seq, b, h, t;
  bool valid;

  // Where the row starts in a (B, H, T, d) tensor of these strides.
  __device__ int64_t in(const SequenceRows& s) const {
    return b * s.batch_stride + h * s.head_stride + t * s.time_stride;
  }
  // The features to touch: all of them, or none past the end.
  __device__ int limit(const RowCount& n) const { return valid ? n.features : 0; }
};

__device__ __forceinline__ RowAt row_at(int64_t row, const RowCount& n) {
  RowAt at;
  at.valid = row < n.rows;
  at.r = at.valid ? static_cast<uint32_t>(row) : 0;
  at.seq = at.r / n.length;
  at.t = at.r - at.seq * n.length;
  at.b = at.seq / n.heads;
  at.h = at.seq - at.b * n.heads;
  return at;
}

// V consecutive features, loaded and stored as one access.
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// The pack at column c of a row if c < limit, else V copies of pad. With V > 1, d and every
// row's start are multiples of V (the host checks), so a pack is wholly in the row or past it.
template <class T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* row, int c, int limit, T pad) {
  Pack<T, V> p;
  if (c < limit) {
    p = *reinterpret_cast<const Pack<T, V>*>(row + c);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p.v[i] = pad;
  }
  return p;
}

template <class T, int V>
__device__ __forceinline__ void store_pack(T* row, int c, int limit, const Pack<T, V>& p) {
  if (c < limit) *reinterpret_cast<Pack<T, V>*>(row + c) = p;
}

template <class T, int V>
__device__ __forceinline__ T pack_max(const Pack<T, V>& p) {
  T best = p.v[0];
#pragma unroll
  for (int i = 1; i < V; ++i) best = keep_max(best, p.v[i]);
  return best;
}

// The first column c + i < limit of the pack at column c holding value (NaN matching NaN), or
// INT_MAX: a column is an int, so the team's first is its min.
template <class T, int V>
__device__ __forceinline__ int pack_first_holding(const Pack<T, V>& p, int c, int limit, T value) {
  int at = INT_MAX;
#pragma unroll
  for (int i = V - 1; i >= 0; --i)
    if (c + i < limit && scalar::same_value(p.v[i], value)) at = c + i;
  return at;
}

template <class T, int V>
__device__ __forceinline__ Pack<T, V> exp_pack(Pack<T, V> p, T m, T scale) {
#pragma unroll
  for (int i = 0; i < V; ++i) p.v[i] = scale * exp(p.v[i] - m);
  return p;
}

// The lanes that share a row: `lanes` of them (a power of two up to 32), this thread `lane`
// among them. A warp holds 32 / lanes teams; a team takes kRowsPerTeam consecutive rows per turn
// of its warp's loop over the rows.
struct RowTeam {
  int lanes, lane;
  int64_t offset;       // the team's first row within its warp's turn
  int64_t first, step;  // the warp's first row, and the rows between its turns

  __device__ explicit RowTeam(int lanes_per_row) : lanes(lanes_per_row), lane(threadIdx.x % 32 % lanes_per_row) {
    const int64_t per_warp = static_cast<int64_t>(32 / lanes) * kRowsPerTeam;
    offset = static_cast<int64_t>(threadIdx.x % 32 / lanes) * kRowsPerTeam;
    first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * per_warp;
    step = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32) * per_warp;
  }

  // The first column of this lane's pack in a segment of the row.
  template <int V>
  __device__ int column(int segment) const {
    return (segment * lanes + lane) * V;
  }

  // The row's max from each lane's: going up from offset 1, a lane holds an aligned run of lanes
  // and its partner the run next to it, earlier when the lane's bit `offset` is set.
  template <class T>
  __device__ T max(T v) const {
    for (int offset = 1; offset < lanes; offset *= 2) {
      const T other = __shfl_xor_sync(kAllLanes, v, offset);
      v = (lane & offset) ? keep_max(other, v) : keep_max(v, other);
    }
    return v;
  }
  // Every lane gets the same bits: each step adds the same two numbers on both sides.
  template <class T>
  __device__ T sum(T v) const {
    for (int offset = 1; offset < lanes; offset *= 2) v += __shfl_xor_sync(kAllLanes, v, offset);
    return v;
  }
  __device__ int min(int v) const {
    for (int offset = 1; offset < lanes; offset *= 2) {
      const int other = __shfl_xor_sync(kAllLanes, v, offset);
      v = other < v ? other : v;
    }
    return v;
  }
};

// How the row passes lay a row on lanes (chosen on the host: launch_row_pass).
struct RowSplit {
  int lanes;     // per row
  int segments;  // pieces of lanes V features; 1 unless d > 32 V
};

// ---- RowMax, and PrefixMax's row passes ----

// m_r = the row's max; with kWithExp (RowMax) also y = scale exp(x - m_r).
template <class T, int V, bool kWithExp>
__global__ void __launch_bounds__(kRowThreads)
    row_max_kernel(const T* x, T* y, T* m, SequenceRows xr, SequenceRows yr, RowCount n, RowSplit split, T scale) {
  const RowTeam team(split.lanes);
  for (int64_t base = team.first; base < n.rows; base += team.step) {
    RowAt at[kRowsPerTeam];
    Pack<T, V> head[kRowsPerTeam];  // each row's first segment, kept for its exps
    T best[kRowsPerTeam];
#pragma unroll
    for (int i = 0; i < kRowsPerTeam; ++i) {
      at[i] = row_at(base + team.offset + i, n);
      head[i] = load_pack<T, V>(x + at[i].in(xr), team.column<V>(0), at[i].limit(n), lowest<T>());
    }
#pragma unroll
    for (int i = 0; i < kRowsPerTeam; ++i) best[i] = team.max(pack_max(head[i]));
    for (int s = 1; s < split.segments; ++s) {  // rows longer than 32 V
      Pack<T, V> p[kRowsPerTeam];
#pragma unroll
      for (int i = 0; i < kRowsPerTeam; ++i)
        p[i] = load_pack<T, V>(x + at[i].in(xr), team.column<V>(s), at[i].limit(n), lowest<T>());
#pragma unroll
      for (int i = 0; i < kRowsPerTeam; ++i) best[i] = keep_max(best[i], team.max(pack_max(p[i])));
    }
#pragma unroll
    for (int i = 0; i < kRowsPerTeam; ++i) {
      if (at[i].valid && team.lane == 0) m[at[i].r] = best[i];
      if constexpr (kWithExp) {
        store_pack(y + at[i].in(yr), team.column<V>(0), at[i].limit(n), exp_pack(head[i], best[i], scale));
        for (int s = 1; s < split.segments; ++s) {
          const Pack<T, V> p = load_pack<T, V>(x + at[i].in(xr), team.column<V>(s), at[i].limit(n), T(0));
          store_pack(y + at[i].in(yr), team.column<V>(s), at[i].limit(n), exp_pack(p, best[i], scale));
        }
      }
    }
  }
}

// PrefixMax's last pass: y = scale exp(x - m_r), m the running max.
template <class T, int V>
__global__ void __launch_bounds__(kRowThreads)
    exp_kernel(const T* x, T* y, const T* m, SequenceRows xr, SequenceRows yr, RowCount n, RowSplit split, T scale) {
  const RowTeam team(split.lanes);
  for (int64_t base = team.first; base < n.rows; base += team.step) {
    RowAt at[kRowsPerTeam];
    T mt[kRowsPerTeam];
#pragma unroll
    for (int i = 0; i < kRowsPerTeam; ++i) {
      at[i] = row_at(base + team.offset + i, n);
      mt[i] = at[i].valid ? m[at[i].r] : T(0);
    }
    for (int s = 0; s < split.segments; ++s) {
      Pack<T, V> p[kRowsPerTeam];
#pragma unroll
      for (int i = 0; i < kRowsPerTeam; ++i)
        p[i] = load_pack<T, V>(x + at[i].in(xr), team.column<V>(s), at[i].limit(n), T(0));
#pragma unroll
      for (int i = 0; i < kRowsPerTeam; ++i)
        store_pack(y + at[i].in(yr), team.column<V>(s), at[i].limit(n), exp_pack(p[i], mt[i], scale));
    }
  }
}

// dx = y dy for one pack; its entries are added to sum (in column order).
template <class T, int V>
__device__ __forceinline__ Pack<T, V> product_pack(const Pack<T, V>& y, const Pack<T, V>& dy, T& sum) {
  Pack<T, V> p;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    p.v[i] = y.v[i] * dy.v[i];
    sum += p.v[i];
  }
  return p;
}

// dx = y dy for the pack at column c, plus g at `column` (the CPU adds g to the stored y dy too).
template <class T, int V>
__device__ __forceinline__ Pack<T, V> gradient_pack(const Pack<T, V>& y, const Pack<T, V>& dy, int c, int column, T g) {
  Pack<T, V> p;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    p.v[i] = y.v[i] * dy.v[i];
    if (c + i == column) p.v[i] += g;
  }
  return p;
}

// forward was y = scale exp(x - m), m the row's max: dx = y dy, plus g = dm - sum_c y dy at the
// max's column.
template <class T, int V>
__global__ void __launch_bounds__(kRowThreads)
    row_max_backward_kernel(const T* x, const T* y, const T* m, const T* dy, const T* dm, T* dx, SequenceRows xr,
                            SequenceRows yr, SequenceRows dyr, SequenceRows dxr, RowCount n, RowSplit split) {
  const RowTeam team(split.lanes);
  for (int64_t base = team.first; base < n.rows; base += team.step) {
    RowAt at[kRowsPerTeam];
    T mt[kRowsPerTeam], dot[kRowsPerTeam];
    int held[kRowsPerTeam];                                            // the first column holding m
    Pack<T, V> xs[kRowsPerTeam], ys[kRowsPerTeam], dys[kRowsPerTeam];  // the first segments
#pragma unroll
    for (int i = 0; i < kRowsPerTeam; ++i) {
      at[i] = row_at(base + team.offset + i, n);
      const int c = team.column<V>(0), limit = at[i].limit(n);
      mt[i] = at[i].valid ? m[at[i].r] : T(0);
      xs[i] = load_pack<T, V>(x + at[i].in(xr), c, limit, T(0));
      ys[i] = load_pack<T, V>(y + at[i].in(yr), c, limit, T(0));
      dys[i] = load_pack<T, V>(dy + at[i].in(dyr), c, limit, T(0));
    }
#pragma unroll
    for (int i = 0; i < kRowsPerTeam; ++i) {
      dot[i] = 0;
      product_pack(ys[i], dys[i], dot[i]);
      held[i] = pack_first_holding(xs[i], team.column<V>(0), at[i].limit(n), mt[i]);
    }
    for (int s = 1; s < split.segments; ++s)
#pragma unroll
      for (int i = 0; i < kRowsPerTeam; ++i) {
        const int c = team.column<V>(s), limit = at[i].limit(n);
        const Pack<T, V> xp = load_pack<T, V>(x + at[i].in(xr), c, limit, T(0));
        product_pack(load_pack<T, V>(y + at[i].in(yr), c, limit, T(0)),
                     load_pack<T, V>(dy + at[i].in(dyr), c, limit, T(0)), dot[i]);
        const int found = pack_first_holding(xp, c, limit, mt[i]);
        held[i] = found < held[i] ? found : held[i];
      }
#pragma unroll
    for (int i = 0; i < kRowsPerTeam; ++i) {
      const T g = (at[i].valid ? dm[at[i].r] : T(0)) - team.sum(dot[i]);
      const int column = team.min(held[i]), limit = at[i].limit(n);
      store_pack(dx + at[i].in(dxr), team.column<V>(0), limit,
                 gradient_pack(ys[i], dys[i], team.column<V>(0), column, g));
      for (int s = 1; s < split.segments; ++s) {
        const int c = team.column<V>(s);
        store_pack(dx + at[i].in(dxr), c, limit,
                   gradient_pack(load_pack<T, V>(y + at[i].in(yr), c, limit, T(0)),
                                 load_pack<T, V>(dy + at[i].in(dyr), c, limit, T(0)), c, column, g));
      }
    }
  }
}

// PrefixMax's backward, first pass. forward was y_t = scale exp(x_t - m_t), m_t the running max,
// so dx_t = y_t dy_t, and g_t = dm_t - sum_c y_t,c dy_t,c (into owed) goes to where m_t came from.
// holder_t: -1 when row t did not raise the running max, else the column of its max (d if none
// holds it, which a max taken from this row rules out).
template <class T, int V>
__global__ void __launch_bounds__(kRowThreads)
    prefix_rows_backward_kernel(const T* x, const T* y, const T* m, const T* previous, const T* dy, const T* dm,
                                T* dx, T* owed, int* holder, SequenceRows xr, SequenceRows yr, SequenceRows dyr,
                                SequenceRows dxr, RowCount n, RowSplit split) {
  const RowTeam team(split.lanes);
  for (int64_t base = team.first; base < n.rows; base += team.step) {
    RowAt at[kRowsPerTeam];
    T mt[kRowsPerTeam], dot[kRowsPerTeam];
    int held[kRowsPerTeam];    // the first column of x holding m_t, INT_MAX while none
    int search[kRowsPerTeam];  // the features of x to search: none unless the row raised the max
#pragma unroll
    for (int i = 0; i < kRowsPerTeam; ++i) {
      at[i] = row_at(base + team.offset + i, n);
      const uint32_t r = at[i].r;
      mt[i] = at[i].valid ? m[r] : T(0);
      // Row t raised the running max (ties stay with the earlier row, or with previous).
      const bool raised = at[i].valid && (at[i].t > 0 ? scalar::takes_over(mt[i], m[r - 1])
                                                      : !previous || scalar::takes_over(mt[i], previous[at[i].seq]));
      search[i] = raised ? n.features : 0;
      dot[i] = 0;
      held[i] = INT_MAX;
    }
    for (int s = 0; s < split.segments; ++s) {
      Pack<T, V> xs[kRowsPerTeam], ys[kRowsPerTeam], dys[kRowsPerTeam];
      const int c = team.column<V>(s);
#pragma unroll
      for (int i = 0; i < kRowsPerTeam; ++i) {
        ys[i] = load_pack<T, V>(y + at[i].in(yr), c, at[i].limit(n), T(0));
        dys[i] = load_pack<T, V>(dy + at[i].in(dyr), c, at[i].limit(n), T(0));
        xs[i] = load_pack<T, V>(x + at[i].in(xr), c, search[i], T(0));
      }
#pragma unroll
      for (int i = 0; i < kRowsPerTeam; ++i) {
        store_pack(dx + at[i].in(dxr), c, at[i].limit(n), product_pack(ys[i], dys[i], dot[i]));
        const int found = pack_first_holding(xs[i], c, search[i], mt[i]);
        held[i] = found < held[i] ? found : held[i];
      }
    }
#pragma unroll
    for (int i = 0; i < kRowsPerTeam; ++i) {
      const T total = team.sum(dot[i]);
      const int column = team.min(held[i]);
      if (at[i].valid && team.lane == 0) {
        owed[at[i].r] = dm[at[i].r] - total;
        holder[at[i].r] = search[i] == 0 ? -1 : (column < n.features ? column : n.features);
      }
    }
  }
}

// ---- the scans along time: a block per sequence, one row per thread, kScanThreads at a time ----

// A sum that restarts at each head: step(earlier, later) keeps later's value at a head.
template <class T>
struct Segment {
  T value;
  int head;
};

template <class T>
__device__ __forceinline__ T shuffle_up(T v, int offset) {
  return __shfl_up_sync(kAllLanes, v, offset);
}
template <class T>
__device__ __forceinline__ Segment<T> shuffle_up(Segment<T> v, int offset) {
  return {__shfl_up_sync(kAllLanes, v.value, offset), __shfl_up_sync(kAllLanes, v.head, offset)};
}

struct MaxStep {
  template <class T>
  __device__ T operator()(T earlier, T later) const {
    return keep_max(earlier, later);
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
  V warp_total[kScanWarps];
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
  if (threadIdx.x == kScanThreads - 1) scan.carry = v;
  return v;
}

// PrefixMax's forward, second pass: m (each row's own max) becomes the running max in place,
// continued from previous (which wins ties); `last`, where given, gets each sequence's final max.
template <class T>
__global__ void __launch_bounds__(kScanThreads)
    running_max_kernel(T* m, const T* previous, T* last, int64_t sequences, int64_t length) {
  __shared__ ScanShared<T> scan;
  for (int64_t seq = blockIdx.x; seq < sequences; seq += gridDim.x) {
    T* ms = m + seq * length;
    if (threadIdx.x == 0) scan.carry = previous != nullptr ? previous[seq] : lowest<T>();
    for (int64_t t0 = 0; t0 < length; t0 += kScanThreads) {
      const int64_t t = t0 + threadIdx.x;
      const T running = scan_tile(t < length ? ms[t] : lowest<T>(), scan, MaxStep{});
      if (t < length) ms[t] = running;
      if (last != nullptr && t == length - 1) last[seq] = running;
    }
    __syncthreads();  // the last tile's carry is written before the next sequence resets it
  }
}

// PrefixMax's backward, second pass: the sum of g over a stretch of rows that share one running
// max goes to the row that raised it (at holder's column of dx, which holds y dy there), or to
// previous.
template <class T>
__global__ void __launch_bounds__(kScanThreads)
    segment_sum_kernel(const T* owed, const int* holder, T* dx, T* dprevious, SequenceRows dxr, int64_t sequences,
                       int64_t length, int d) {
  __shared__ ScanShared<Segment<T>> scan;
  for (int64_t seq = blockIdx.x; seq < sequences; seq += gridDim.x) {
    const T* gs = owed + seq * length;
    const int* hs = holder + seq * length;
    if (threadIdx.x == 0) scan.carry = Segment<T>{T(0), 0};
    // Element j of the scan is row length - 1 - j; a segment starts after each row that raised the
    // max, so at such a row the scan holds the sum of g over the rows it owns.
    for (int64_t j0 = 0; j0 < length; j0 += kScanThreads) {
      const int64_t j = j0 + threadIdx.x, t = length - 1 - j;
      Segment<T> v{T(0), 0};
      if (j < length) v = {gs[t], j == 0 || hs[t + 1] >= 0};
      v = scan_tile(v, scan, SegmentStep{});
      if (j >= length) continue;
      const int column = hs[t];
      if (column >= 0 && column < d) dx[dxr.at(seq, t) + column] += v.value;
      if (t == 0 && dprevious != nullptr) dprevious[seq] = column >= 0 ? T(0) : v.value;
    }
    __syncthreads();  // the last tile's carry is written before the next sequence resets it
  }
}

// ---- host side ----

// A (B, H, T, d) input as the kernels take it: B H sequences of T rows of d features.
RowCount row_count(const Tensor& x, const char* op) {
  LINEA_CHECK(x.size(3) < (int64_t{1} << 30), op, "at most 2^30 features per row, got ", x.describe());
  const int64_t rows = x.size(0) * x.size(1) * x.size(2);
  LINEA_CHECK(rows < (int64_t{1} << 31), op, "at most 2^31 - 1 rows (B H T), got ", x.describe());
  return {static_cast<uint32_t>(rows), static_cast<uint32_t>(x.size(2)), static_cast<uint32_t>(x.size(1)),
          static_cast<int>(x.size(3))};
}

// Blocks for the scans: one per sequence, at most as many as the SMs hold at once (a block then
// takes several sequences in turn).
unsigned sequence_blocks(int64_t sequences, int device) {
  const int64_t cap = static_cast<int64_t>(sm_count(device)) * (2048 / kScanThreads);
  return static_cast<unsigned>(sequences < cap ? sequences : cap);
}

// Calls launch.template operator()<V>(split, blocks) for a row pass over the given (B, H, T, d)
// tensors: V = 16 bytes' worth of features when d, every tensor's first element and its strides
// allow loads of that size, else 1; the team size that covers a row in one load per lane; blocks
// enough for one row per team and turn, at most a few waves of the device (the warps then loop).
template <class T, class Launch>
void launch_row_pass(const RowCount& n, std::initializer_list<const Tensor*> tensors, int device, Launch&& launch) {
  constexpr int kPack = 16 / sizeof(T);
  bool packed = n.features % kPack == 0;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    packed = packed && reinterpret_cast<uintptr_t>(t->data<T>()) % 16 == 0;
    for (int k = 0; k < 3; ++k) packed = packed && (t->size(k) == 1 || t->stride(k) % kPack == 0);
  }
  const int width = packed ? kPack : 1;
  const int packs = (n.features + width - 1) / width;
  int lanes = 1;
  while (lanes < packs && lanes < 32) lanes *= 2;
  const RowSplit split{lanes, (packs + lanes - 1) / lanes};
  const int64_t per_block = static_cast<int64_t>(kRowThreads / 32) * (32 / lanes) * kRowsPerTeam;
  const int64_t needed = ceil_div(n.rows, per_block);
  const int64_t cap = static_cast<int64_t>(sm_count(device)) * (2048 / kRowThreads) * 4;
  const auto blocks = static_cast<unsigned>(needed < cap ? needed : cap);
  if (packed) launch.template operator()<kPack>(split, blocks);
  else launch.template operator()<1>(split, blocks);
}

}  // namespace

void CudaBackend::normalized_exp(const Tensor& x, NormalizedExpMode mode, double scale, const Tensor& previous,
                                 const Tensor& y, const Tensor& m, const Tensor& last) const {
  const char* op = "normalized_exp";
  check_on_device(device_, op, {&x, &previous, &y, &m, &last});
  const RowCount n = row_count(x, op);
  if (n.rows == 0) return;
  const cudaStream_t stream = use_device(device_);
  dispatch_floating(x.dtype(), op, [&]<class T>() {
    const T s = static_cast<T>(scale);
    launch_row_pass<T>(n, {&x, &y}, device_, [&]<int V>(RowSplit split, unsigned blocks) {
      if (mode == NormalizedExpMode::RowMax) {
        row_max_kernel<T, V, true><<<blocks, kRowThreads, 0, stream>>>(
            x.data<T>(), y.data<T>(), m.data<T>(), sequence_rows(x), sequence_rows(y), n, split, s);
        LINEA_CUDA_LAUNCH_CHECK(op, x.describe());
        return;
      }
      const int64_t sequences = n.rows / n.length;
      row_max_kernel<T, V, false><<<blocks, kRowThreads, 0, stream>>>(
          x.data<T>(), y.data<T>(), m.data<T>(), sequence_rows(x), sequence_rows(y), n, split, s);
      LINEA_CUDA_LAUNCH_CHECK(op, x.describe());
      running_max_kernel<T><<<sequence_blocks(sequences, device_), kScanThreads, 0, stream>>>(
          m.data<T>(), data_or_null<T>(previous), data_or_null<T>(last), sequences, n.length);
      LINEA_CUDA_LAUNCH_CHECK(op, x.describe());
      exp_kernel<T, V><<<blocks, kRowThreads, 0, stream>>>(x.data<T>(), y.data<T>(), m.data<T>(), sequence_rows(x),
                                                         sequence_rows(y), n, split, s);
      LINEA_CUDA_LAUNCH_CHECK(op, x.describe());
    });
  });
}

void CudaBackend::normalized_exp_backward(const Tensor& x, const Tensor& y, const Tensor& m, const Tensor& previous,
                                          const Tensor& dy, const Tensor& dm, NormalizedExpMode mode,
                                          const Tensor& dx, const Tensor& dprevious) const {
  const char* op = "normalized_exp_backward";
  check_on_device(device_, op, {&x, &y, &m, &previous, &dy, &dm, &dx, &dprevious});
  const RowCount n = row_count(x, op);
  if (n.rows == 0) return;
  const cudaStream_t stream = use_device(device_);
  dispatch_floating(x.dtype(), op, [&]<class T>() {
    if (mode == NormalizedExpMode::RowMax) {
      launch_row_pass<T>(n, {&x, &y, &dy, &dx}, device_, [&]<int V>(RowSplit split, unsigned blocks) {
        row_max_backward_kernel<T, V><<<blocks, kRowThreads, 0, stream>>>(
            x.data<T>(), y.data<T>(), m.data<T>(), dy.data<T>(), dm.data<T>(), dx.data<T>(), sequence_rows(x),
            sequence_rows(y), sequence_rows(dy), sequence_rows(dx), n, split);
        LINEA_CUDA_LAUNCH_CHECK(op, x.describe());
      });
      return;
    }
    const int64_t sequences = n.rows / n.length;
    const DeviceBuffer owed(static_cast<size_t>(n.rows) * sizeof(T), device_);
    const DeviceBuffer holder(static_cast<size_t>(n.rows) * sizeof(int), device_);
    launch_row_pass<T>(n, {&x, &y, &dy, &dx}, device_, [&]<int V>(RowSplit split, unsigned blocks) {
      prefix_rows_backward_kernel<T, V><<<blocks, kRowThreads, 0, stream>>>(
          x.data<T>(), y.data<T>(), m.data<T>(), data_or_null<T>(previous), dy.data<T>(), dm.data<T>(), dx.data<T>(),
          owed.as<T>(), holder.as<int>(), sequence_rows(x), sequence_rows(y), sequence_rows(dy), sequence_rows(dx),
          n, split);
      LINEA_CUDA_LAUNCH_CHECK(op, x.describe());
    });
    segment_sum_kernel<T><<<sequence_blocks(sequences, device_), kScanThreads, 0, stream>>>(
        owed.as<T>(), holder.as<int>(), dx.data<T>(), data_or_null<T>(dprevious), sequence_rows(dx), sequences,
        n.length, n.features);
    LINEA_CUDA_LAUNCH_CHECK(op, x.describe());
  });
}

}  // namespace linea::cuda
