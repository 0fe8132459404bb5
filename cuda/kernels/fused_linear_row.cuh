#pragma once
// fused_linear's kernel for one input row, the batch-1 decoding step (fused_linear.cu launches it
// and alone includes this file).
//
// The staged kernel (fused_linear.cu) puts a chain of block-wide steps between the wait and the
// products: stage the rows, a barrier, one warp's statistics, a barrier, the norm in place, a
// barrier. With one input row, after the one barrier that stages it, every warp runs on its own:
// each lane takes the row's columns its weights meet from shared memory into registers, the warp
// takes the norm's statistics from its lanes (warp sums, the same in every warp) and norms its
// lanes' columns in place, once for all the outputs it computes (an RMSNorm's rstd multiplies the
// products' sums instead: norm_held_row). A normed row must fit one batch of a lane's registers
// (kBatchColumns: 1024 floats); a row of at most half a batch is taken two outputs at a time
// (RowWork::Pairs, takes_pairs); a row without a norm is read a batch at a time, or, where the
// grid has the warps, split into spans of a batch, a warp each (spans_per_row_log2). The sum of
// squares and the norm are computed in the row's type (the staged kernel computes them in double;
// a LayerNorm's mean and centring still are): every warp computes them again, and a conversion to
// double per element and warp cost more than the barriers saved.
//
// Side by side on the H200, a ReGLA decoding step went from 8,396 - 8,484 to 8,792 - 8,812
// tokens/s, softmax at 2k from 6,615 - 6,636 to 6,745 - 6,787 (docs/benchmarks.md). Folding the
// norm into the weights instead (r sum_c (w_jc g_c)(x_c - mu) + sum_c w_jc b_c, w g ready before
// the wait) was much slower: the fold waits for the weights before the warps reach the wait that
// lets the next kernel start, and every product converted its terms to double (6,600 tokens/s with
// each warp reading the row from global memory and no barrier, 6,350 with it staged).
#include <type_traits>

#include "cuda/kernels/fused_linear_weights.cuh"

namespace linea::cuda {
namespace {

// The lane's columns of batch `base` of the staged row (zeros past `len`), as its weights meet them.
template <class T, int kWidth>
__device__ __forceinline__ void load_row_batch(Pack<T, kWidth> (&x)[kUnroll], const T* row, int64_t base,
                                               int64_t len) {
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    const int64_t c = base + k * 32 * kWidth;
    if (c < len) x[k] = *reinterpret_cast<const Pack<T, kWidth>*>(row + c);
    else x[k] = Pack<T, kWidth>{};
  }
}

// The norm's gain at the lane's columns (1 where there is none).
template <class T, int kWidth>
__device__ __forceinline__ void load_gain(Pack<T, kWidth> (&gain)[kUnroll], const T* values, int64_t in) {
  const int64_t lane_column = (threadIdx.x % 32) * kWidth;
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    const int64_t c = lane_column + k * 32 * kWidth;
    if (values && c < in) {
      gain[k] = load_weights<T, kWidth>(values + c);
    } else {
#pragma unroll
      for (int e = 0; e < kWidth; ++e) gain[k].v[e] = T(1);
    }
  }
}

// The sum of kWidth running sums, pairwise.
template <class T, int kWidth>
__device__ __forceinline__ T sum_of(const T (&parts)[kWidth]) {
  static_assert(kWidth == 1 || kWidth == 2 || kWidth == 4, "a load holds 1, 2 or 4 elements");
  if constexpr (kWidth == 1) return parts[0];
  else if constexpr (kWidth == 2) return parts[0] + parts[1];
  else return (parts[0] + parts[1]) + (parts[2] + parts[3]);
}

// 1 / sqrt(mean square + eps) in the row's type. In double, the division, the root and the
// reciprocal are each a subroutine of tens of instructions, a few hundred cycles in the chain after
// the wait of every normed product; in float each is a few, and the result is within about two
// units in the last place of the CPU's (norm_rstd, in double).
template <class T>
__device__ __forceinline__ T row_rstd(T sum_squares, int64_t width, double eps) {
  if constexpr (sizeof(T) == sizeof(float))
    return 1.0f / sqrtf(sum_squares / static_cast<float>(width) + static_cast<float>(eps));
  else
    return norm_rstd(sum_squares, static_cast<double>(width), eps);
}

// Stages the input row x[0..in) in shared memory, each thread asking for all of its columns
// before it stores any (a store waits for its load, so a loop of load-then-store made one trip to
// memory per column a thread holds: 2,300 cycles for a row of 2,048 on 512 threads).
template <class T, int kThreads>
__device__ __forceinline__ void stage_row(T* staged, const T* x, int64_t in) {
  constexpr int kLoads = 4;
  for (int64_t base = threadIdx.x; base < in; base += kLoads * kThreads) {
    T v[kLoads];
#pragma unroll
    for (int i = 0; i < kLoads; ++i) v[i] = base + i * kThreads < in ? x[base + i * kThreads] : T(0);
#pragma unroll
    for (int i = 0; i < kLoads; ++i)
      if (base + i * kThreads < in) staged[base + i * kThreads] = v[i];
  }
}

// The input row from an attention step's splits (attention_splits.h): column c = (head h, dim d)
// of the row is
//   sum_i exp(max_hi - M_h) acc_hid / sum_i exp(max_hi - M_h) sum_hi,    M_h = max_i max_hi,
// over the live splits i, the merge kernel's sum (cuda/kernels/cached_attention.cu). Each thread
// asks for its column's weighted values of every split at once; meanwhile a warp per head turns the
// splits' maxima and sums into weights, in shared memory (`weights`, kMaxMergedSplits a head). How
// many splits are live is itself the split kernel's output: every split's values are asked for
// with it, in the same trip, and those of splits not live are left out afterwards by a select (they
// are stale, possibly NaN). A split whose scores were all NaN has max -inf and a NaN sum: it weighs
// 0 and 0 NaN makes its row NaN, as the merge kernel does. The first block advances the row's
// position: every block of the split kernel, which read it, has finished.
template <int kThreads>
__device__ __forceinline__ void stage_merged_row(float* staged, float* weights, const ProductArgs<float>& a) {
  const AttentionSplits& sp = a.splits;
  const bool advances = blockIdx.x == 0 && threadIdx.x == 0;
  const int64_t position = advances ? *sp.positions : 0;
  const int live = *sp.live, splits = sp.splits, dh = sp.dh, heads = static_cast<int>(a.in) / dh;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int c0 = 0; c0 < a.in; c0 += kThreads) {
    const int c = c0 + static_cast<int>(threadIdx.x), h = c / dh, d = c % dh;
    const float* acc = sp.acc + static_cast<int64_t>(h) * splits * dh + d;
    float value[kMaxMergedSplits];
#pragma unroll
    for (int i = 0; i < kMaxMergedSplits; ++i)
      value[i] = c < a.in && i < splits ? __ldcg(acc + i * dh) : 0.0f;  // (__ldcg: written by other SMs)
    if (c0 == 0) {
      for (int head = warp; head < heads; head += kThreads / 32) {
        const float* max = sp.max + head * splits;
        const float* sum = sp.sum + head * splits;
        float m0 = lane < splits ? __ldcg(max + lane) : 0.0f, m1 = lane + 32 < splits ? __ldcg(max + lane + 32) : 0.0f;
        float s0 = lane < splits ? __ldcg(sum + lane) : 0.0f, s1 = lane + 32 < splits ? __ldcg(sum + lane + 32) : 0.0f;
        const bool here0 = lane < live, here1 = lane + 32 < live;
        m0 = here0 ? m0 : -INFINITY, m1 = here1 ? m1 : -INFINITY;
        s0 = here0 ? s0 : 0.0f, s1 = here1 ? s1 : 0.0f;
        const float top = warp_max(fmaxf(m0, m1));
        const float e0 = m0 == -INFINITY ? 0.0f : expf(m0 - top), e1 = m1 == -INFINITY ? 0.0f : expf(m1 - top);
        const float total = warp_sum(s0 * e0 + s1 * e1);
        if (here0) weights[head * kMaxMergedSplits + lane] = e0 / total;
        if (here1) weights[head * kMaxMergedSplits + lane + 32] = e1 / total;
      }
      __syncthreads();
    }
    if (c >= a.in) continue;
    float v = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxMergedSplits; ++i)
      v += i < live ? weights[h * kMaxMergedSplits + i] * value[i] : 0.0f;
    staged[c] = live > 0 ? v : NAN;
  }
  if (advances) *sp.positions = (position > 0 ? position : 0) + 1;
}

// The norm's work on the lanes' columns before the products (the statistics from warp sums over
// the lanes, the same in every warp). A LayerNorm is applied in place, (x - mean) / std * gain +
// shift; its gain is in registers since before the wait, its shift read here (registers for both
// would spill). An RMSNorm leaves x * gain in place and returns the lane's part of the sum of
// squares: its rstd multiplies each product's sum instead (rstd sum_c w_c x_c g_c), so that the
// warp sums of the squares and of the first product run side by side (the rstd's chain of five
// shuffles, a root and a division was before every product).
template <class T, int kWidth>
__device__ __forceinline__ T norm_held_row(const ProductArgs<T>& a, const T* staged, Pack<T, kWidth> (&x)[kUnroll],
                                           const Pack<T, kWidth> (&gain)[kUnroll]) {
  const int64_t lane_column = (threadIdx.x % 32) * kWidth;
  if (a.norm == RowNorm::Layer) {
    // The mean in double (from the staged row, which costs fewer registers than the lanes' copies)
    // and the row centred on it before anything is squared: an input far from zero would
    // otherwise lose its digits to the rounding of a float mean.
    double sum = 0;
    for (int64_t c = threadIdx.x % 32; c < a.in; c += 32) sum += staged[c];
    const double mean = warp_sum(sum) / a.in;
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (lane_column + k * 32 * kWidth >= a.in) continue;
#pragma unroll
      for (int e = 0; e < kWidth; ++e) x[k].v[e] = static_cast<T>(x[k].v[e] - mean);
    }
  }
  T sq[kWidth] = {};
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    if (lane_column + k * 32 * kWidth >= a.in) continue;
#pragma unroll
    for (int e = 0; e < kWidth; ++e) sq[e] += x[k].v[e] * x[k].v[e];
  }
  if (a.norm == RowNorm::Layer) {
    const T rstd = row_rstd(warp_sum(sum_of(sq)), a.in, a.eps);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (lane_column + k * 32 * kWidth >= a.in) continue;
#pragma unroll
      for (int e = 0; e < kWidth; ++e) {
        x[k].v[e] = x[k].v[e] * rstd * gain[k].v[e];
        if (a.norm_bias) x[k].v[e] += __ldg(a.norm_bias + lane_column + k * 32 * kWidth + e);
      }
    }
    return T(0);
  }
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    if (lane_column + k * 32 * kWidth >= a.in) continue;
#pragma unroll
    for (int e = 0; e < kWidth; ++e) x[k].v[e] *= gain[k].v[e];
  }
  return sum_of(sq);
}

// The lane's share of w . x over one batch, in kWidth running sums (one per element of a load),
// so that the chain of dependent additions is kUnroll long, not kUnroll * kWidth.
template <class T, int kWidth>
__device__ __forceinline__ T batch_dot(const WeightBatch<T, kWidth, false>& b, const Pack<T, kWidth> (&x)[kUnroll],
                                       int64_t base, int64_t len) {
  T acc[kWidth] = {};
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    if (base + k * 32 * kWidth >= len) continue;
#pragma unroll
    for (int e = 0; e < kWidth; ++e) acc[e] += b.w[k].v[e] * x[k].v[e];
  }
  return sum_of(acc);
}

// Whether fused_row_kernel takes a product: one input row that fits the stage, not a gated unit,
// and no more than a batch wide when it is normed (its statistics need it all at once).
template <class T, int kWidth>
bool takes_one_row(int rows, int64_t in, RowNorm norm, bool gated) {
  const bool fits = in > 0 && in * static_cast<int64_t>(sizeof(T)) <= kStageBytes;
  return rows == 1 && !gated && fits && (norm == RowNorm::None || in <= kBatchColumns<kWidth>);
}

// The warps that share an output's row in fused_row_kernel, as log2 (0: one warp, the row whole).
// A warp reads its row's first batch of weights before the wait and the rest after it. A plain
// row longer than a batch, such as the MLP's second product's 2048 columns, is split into the
// fewest spans of at most a batch (each whole loads for every lane), one warp a span, so that
// every weight is in registers before the wait: a decoding ReGLA layer's second MLP product went
// from 3.4 to 2.7 - 2.9 us. The split is taken only where the grid covers the outputs' warps in one
// pass. Splitting further, so that a matrix of few outputs filled every SM, was slower: the next
// kernel's blocks then found no SM free to start on and load their weights early
// (docs/benchmarks.md). A normed row is not split (its statistics need the whole row in each warp).
template <int kWidth, int kWarps = warps_per_block(false)>
int spans_per_row_log2(int64_t in, int64_t outputs, RowNorm norm, int64_t grid_warps) {
  if (norm != RowNorm::None) return 0;
  int log2 = 0;
  while ((in >> log2) > kBatchColumns<kWidth> && in % ((int64_t{2} << log2) * 32 * kWidth) == 0) ++log2;
  return (int64_t{1} << log2) <= kWarps && (outputs << log2) <= grid_warps ? log2 : 0;
}

// Whether a warp takes its outputs two at a time (RowWork::Pairs): a row of at most half a batch
// (d_model = 512 in float) and more outputs than a block has warps. The two rows share one batch
// of loads, a half each, so both are in flight before the wait, and the kernel runs on half as
// many SMs: the next kernel's blocks find the others free, start, and load their weights while
// this one runs (a block of 16 warps holds the registers of a whole SM, so without free SMs the
// next kernel starts only as this one's blocks finish). Side by side on one H100, ReGLA's decoding
// step at 2k (tokens/s, docs/benchmarks.md):
//   single rows                                                   9,220 - 9,445
//   pairs only where the rows outnumber the grid's warps          9,465 - 9,580
//   pairs except where they fill under a quarter of the SMs       9,660 - 9,850
//   pairs wherever a row is at most half a batch                 10,112 - 10,234
// The attention output's 512 outputs took longer in pairs on 16 SMs than single on 32 (2.2 against
// 1.9 us a layer), but the MLP product after it started sooner by more.
template <class T, int kWidth, int kWarps = warps_per_block(false)>
bool takes_pairs(int64_t in, int64_t outputs) {
  return 2 * in <= kBatchColumns<kWidth> && outputs > kWarps;
}

// The lane's columns of two rows in the batch's halves (a null row1 leaves its half zero).
template <class T, int kWidth>
__device__ __forceinline__ void load_pair(WeightBatch<T, kWidth, false>& b, const T* row0, const T* row1, int64_t base,
                                          int64_t len) {
  constexpr int kHalf = kUnroll / 2;
#pragma unroll
  for (int k = 0; k < kHalf; ++k) {
    const int64_t c = base + k * 32 * kWidth;
    if (c >= len) continue;
    b.w[k] = load_weights<T, kWidth>(row0 + c);
    b.w[kHalf + k] = row1 ? load_weights<T, kWidth>(row1 + c) : Pack<T, kWidth>{};
  }
}

// The lane's shares of the two outputs' w . x (load_pair's halves), as batch_dot.
template <class T, int kWidth>
__device__ __forceinline__ void pair_dots(const WeightBatch<T, kWidth, false>& b, const Pack<T, kWidth> (&x)[kUnroll],
                                          int64_t base, int64_t len, T (&acc)[2]) {
  constexpr int kHalf = kUnroll / 2;
  T first[kWidth] = {}, second[kWidth] = {};
#pragma unroll
  for (int k = 0; k < kHalf; ++k) {
    if (base + k * 32 * kWidth >= len) continue;
#pragma unroll
    for (int e = 0; e < kWidth; ++e) {
      first[e] += b.w[k].v[e] * x[k].v[e];
      second[e] += b.w[kHalf + k].v[e] * x[k].v[e];
    }
  }
  acc[0] = sum_of(first);
  acc[1] = sum_of(second);
}

// How fused_row_kernel's warps take their outputs.
enum class RowWork {
  Whole,  // one output at a time, its row a batch of loads after another
  Spans,  // 2^a.spans_log2 warps to an output, each a span of its columns (spans_per_row_log2); the
          // grid covers the outputs in one pass, and the block's warps add their sums through
          // shared memory in span order
  Pairs,  // two outputs at a time, group g's and group g + gridDim.x's (takes_pairs)
};

template <class T, int kWidth, RowWork kWork, int kWarps = warps_per_block(false)>
__global__ void __launch_bounds__(32 * kWarps) fused_row_kernel(ProductArgs<T> a) {
  constexpr bool kSplit = kWork == RowWork::Spans, kPairs = kWork == RowWork::Pairs;
  constexpr int kRows = kPairs ? 2 : 1;  // outputs a warp computes at once; lane r finishes the r-th
  extern __shared__ __align__(16) unsigned char shared[];
  T* staged = reinterpret_cast<T*>(shared);
  __shared__ T partial[kSplit ? kWarps : 1];  // the warps' sums of their spans
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int spans_log2 = kSplit ? a.spans_log2 : 0, spans = 1 << spans_log2;
  const int64_t lane_column = lane * kWidth, span = a.in >> spans_log2;
  const bool normed = !kSplit && a.norm != RowNorm::None, held = !kSplit && a.in <= kBatchColumns<kWidth>;
  const int64_t groups = ((a.outputs << spans_log2) + kWarps - 1) / kWarps;
  const int64_t first_column = (warp % spans) * span;  // the warp's span (the same in every group)
  const int64_t end_column = first_column + span;
  // The outputs of the warp's r-th row in `group` (past the last where there is none).
  auto output = [&](int64_t group, int r) { return ((group + r * gridDim.x) * kWarps + warp) >> spans_log2; };
  const bool finishes_a_row = lane < kRows && warp % spans == 0;  // lane r finishes row r
  // Before the wait: the first group's weights (their first batch) and the bias of the lane's row,
  // and the norm's gain, all in flight (nothing waits for them until after the wait). The later
  // batches of weights are loaded into the same registers.
  WeightBatch<T, kWidth, false> w;
  T first_bias = T(0);
  const int64_t first = output(blockIdx.x, 0);
  if (first < a.outputs) {
    const T* w_row = a.weight + first * a.in;
    if constexpr (kPairs) {
      const int64_t second = output(blockIdx.x, 1);
      load_pair<T, kWidth>(w, w_row, second < a.outputs ? a.weight + second * a.in : nullptr, lane_column, a.in);
    } else {
      load_batch<T, kWidth, false>(w, w_row, nullptr, first_column + lane_column, end_column);
      const int64_t loaded = held || span < kBatchColumns<kWidth> ? span : kBatchColumns<kWidth>;  // (no ODR use)
      prefetch_row(w_row, first_column + loaded, end_column);
    }
    const int64_t mine = output(blockIdx.x, lane);
    if (finishes_a_row && a.bias && mine < a.outputs) first_bias = __ldg(a.bias + mine);
  }
  if (!kSplit) prefetch_later_rows<T, kWarps, false>(a, groups, kRows);
  Pack<T, kWidth> gain[kUnroll];
  if (normed) load_gain<T, kWidth>(gain, a.norm_weight, a.in);
  wait_for_prior_kernels();  // x and the residual are an earlier kernel's output
  // The residual of the lane's first row is asked for with the row, so the two trips to memory
  // overlap (read in the epilogue, it was a trip of its own after the products).
  const int64_t first_mine = output(blockIdx.x, lane);
  const T first_residual = finishes_a_row && first_mine < a.outputs && a.residual ? a.residual[first_mine] : T(0);
  // x null: the row is an attention step's splits, merged here (attention_splits.h: float32, pairs,
  // 16-byte loads).
  if constexpr (std::is_same_v<T, float> && kWidth == 4 && kPairs) {
    if (a.x == nullptr) stage_merged_row<32 * kWarps>(staged, staged + a.in, a);
    else stage_row<T, 32 * kWarps>(staged, a.x, a.in);
  } else {
    stage_row<T, 32 * kWarps>(staged, a.x, a.in);
  }
  __syncthreads();
  Pack<T, kWidth> x[kUnroll];
  if (held) load_row_batch<T, kWidth>(x, staged, lane_column, a.in);
  // An RMSNorm's rstd, taken with the first products' warp sums (norm_held_row); 1 otherwise.
  bool rstd_pending = normed && a.norm == RowNorm::RMS;
  T lane_squares = normed ? norm_held_row<T, kWidth>(a, staged, x, gain) : T(0), scale = T(1);

  for (int64_t group = blockIdx.x; group < groups; group += kRows * gridDim.x) {
    const int64_t j = output(group, 0);
    const bool active = j < a.outputs;
    if (!active && !kSplit) break;  // no barrier below: a warp without an output is done
    const bool first_group = group == blockIdx.x;
    // The lane's row (lane r < kRows finishes row r): its residual and bias are asked for before
    // the products, so that their trips overlap the weights'.
    const int64_t mine = output(group, lane);
    const bool finishes = finishes_a_row && mine < a.outputs;
    const T residual = first_group ? first_residual : finishes && a.residual ? a.residual[mine] : T(0);
    const T bias = first_group ? first_bias : finishes && a.bias ? a.bias[mine] : T(0);
    T acc[kRows + 1] = {};  // the rows' sums, then (rstd_pending) the lanes' squares
    if (active) {
      if constexpr (kPairs) {
        const int64_t second = output(group, 1);
        if (!first_group)
          load_pair<T, kWidth>(w, a.weight + j * a.in, second < a.outputs ? a.weight + second * a.in : nullptr,
                               lane_column, a.in);
        T pair[2];
        pair_dots<T, kWidth>(w, x, lane_column, a.in, pair);
        acc[0] = pair[0];
        acc[1] = pair[1];
      } else {
        const T* w_row = a.weight + j * a.in;
        for (int64_t base = first_column + lane_column; base < end_column; base += kBatchColumns<kWidth>) {
          if (!first_group || base != first_column + lane_column)
            load_batch<T, kWidth, false>(w, w_row, nullptr, base, end_column);
          if (!held) load_row_batch<T, kWidth>(x, staged, base, end_column);
          acc[0] += batch_dot<T, kWidth>(w, x, base, end_column);
        }
      }
      if (rstd_pending) {
        acc[kRows] = lane_squares;
        warp_sums<kRows + 1>(acc);
        scale = row_rstd(acc[kRows], a.in, a.eps);
        rstd_pending = false;
      } else {
        warp_sums<kRows>(acc);
      }
    }
    if constexpr (kSplit) {
      if (lane == 0) partial[warp] = acc[0];
      __syncthreads();
      if (finishes)
        for (int other = 1; other < spans; ++other) acc[0] += partial[warp + other];
      __syncthreads();  // every sum is read before a next group writes the partials again
    }
    if (!finishes) continue;
    T v = (kPairs && lane == 1 ? acc[1] : acc[0]) * scale + bias;  // (a select: an index by lane would put acc in memory)
    if (a.activate) v = activation_value(a.activation, v);
    if (a.residual) v += residual;
    a.out[mine] = v;
  }
}

}  // namespace
}  // namespace linea::cuda
