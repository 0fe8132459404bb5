#pragma once
// Warp-level building blocks of the chunked gated-linear-attention kernels (chunked_scan_kernels.cuh).
//
// A block works on one chunk of kChunk positions of one sequence, with tiles of the chunk's rows
// in shared memory: q, k, v, ... as (positions x channels), kWidth = 64 channels of each, rows
// padded to kPitch. Sub-block a (positions 16 a .. 16 a + 15) is the "stripe" of kSplit warps:
// its 16 rows are the rows of every product they compute, in the mma accumulator layout
// (mma.cuh), and the columns (64 channels, or the chunk's positions) are shared among them
// (WarpPart).
//
// A "side" is one dim of the state with its log decays: the key side (gk, over the key channels)
// or the value side (gv, over the value channels). Its decays are kept as cumulative sums over the
// chunk in double, L_t = sum of g over the chunk's positions 0..t (<= 0, non-increasing in t), so
// that the decay from position s to position t > s is exp(L_t - L_s), and the difference of two
// sums is the sum over the steps between them to double precision (in float32, a difference of two
// sums near -1000 would keep only ~1e-4 of an exponent near 0).
//
// Two kinds of products:
//   scores   S[t][s] = sum_c X[t][c] Y[s][c] exp(L_t,c - L_s,c) for s < t   (a contraction over the side)
//   decayed  out[t][c] += sum_s S[t][s] Y[s][c] exp(L_t,c - L_s,c)  (a contraction over positions),
//            causal (rows t, columns s < t) or anti-causal (rows s, columns t > s: the adjoint the
//            backward needs, reading the same S transposed)
// Every exponent must be <= 0 (nothing overflows, whatever the decays). Per channel, the
// exponential does not factor out of the sum, so the chunk's 16 x 16 sub-blocks are treated in
// two ways (FlashLinearAttention's secondary chunking):
//   * below the diagonal (t and s in different sub-blocks), through a reference point R between
//     them: exp(L_t - L_s) = exp(L_t - L_R) exp(L_R - L_s), both factors <= 1, so the product is a
//     matrix product of rescaled operands, on the tensor cores. R is the last position before the
//     row's sub-block (causal) or the last position of the row's sub-block (anti-causal).
//   * the diagonal sub-block, elementwise, with one exponential per term (only s < t).
// With one decay per step the factor exp(L_t - L_s) is a scalar per (t, s): the scores are a
// plain product scaled elementwise, and a decayed product scales S before a plain product.
// Without decay (or when the kernels have factored the decays out of the operands, as they do for
// chunks that decay little: chunked_scan_kernels.cuh) both are plain masked products.
//
// The s = t term of every score matrix is kept apart (the stripe holds 0 there and `diag` its
// value): the backward's decay gradient is then formed without the cancellation of those terms
// (chunked_scan_kernels.cuh explains).
//
// Products are computed by warp_product in one of three ways (Products, chunked_scan.h) with one
// accumulator layout: on the tensor cores (mma.sync, float32 accumulation, operands rounded to
// TF32 or to bfloat16), or exactly (fused multiply-adds in the element type, for float32 with TF32
// off and for float64). TF32 operands come rounded (product_operand): the tiles the products read
// are rounded once, as they are written, and an operand computed on the way (a tile element times
// a decay factor) is rounded where it is computed. Rounding every fragment as it was loaded cost
// two instructions an element at each of its loads: rounded once, forward+backward takes 3-4%
// less time at T = 16k on an H200 (with no rounding at all, as a bound, 7% less; docs/benchmarks.md).
// bfloat16 operands are rounded as the fragments are packed, from float32 tiles.
#include <cstdint>
#include <type_traits>

#include "cuda/kernels/chunked_scan.h"
#include "cuda/kernels/mma.cuh"

namespace linea::cuda::chunked {

enum DecayMode : int { kNoDecay = 0, kScalarDecay = 1, kChannelDecay = 2 };

constexpr int kWidth = 64;  // channels of a tile: dk and dv are cut into tiles of at most 64
constexpr int kSub = 16;    // positions of a sub-block: one stripe's rows, the mma's M
constexpr int kSplit = 4;   // warps sharing a stripe's columns

template <class T>
struct Geometry {
  // float64 runs shorter chunks: its tiles take twice the shared memory.
  static constexpr int kChunk = sizeof(T) == 4 ? 64 : 32;
  static constexpr int kStripes = kChunk / kSub;
  static constexpr int kWarps = kStripes * kSplit;  // warps of a per-chunk block
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kPitch = kWidth + 4;         // elements per shared row of a (positions x channels) tile
  static constexpr int kStripePitch = kChunk + 8;   // elements per shared row of a score stripe
  static constexpr int kTiles = kChunk / 8;         // 8-column tiles across a score stripe
  // Doubles per shared row of cumulative log decays, padded like the tiles: a mild chunk puts two
  // float tiles of factors with rows of kLogPitch in their place (chunked_scan_kernels.cuh:
  // ScaleFactors), and rows of 64 would put a fragment's 8 rows in one bank.
  static constexpr int kLogPitch = kWidth + 4;
  static constexpr int kStripeTiles = kTiles / kSplit;  // a warp's tiles of a stripe
  // A state tile (kWidth x kWidth) among a block's warps as a 64-channel result is among a
  // stripe's: each warp holds kStateRows groups of 16 rows of it.
  static constexpr int kStateRows = kWidth / kSub / kStripes;
};
constexpr int kChannelTiles = kWidth / 8 / kSplit;  // a warp's 8-column tiles of a 64-channel result

// A warp's share of a per-chunk block's work: stripe a (rows 16 a .. 16 a + 15) and part h of
// every result's columns: of 64 channels the contiguous 64 / kSplit from 64 h / kSplit; of a
// stripe's positions the interleaved 8-column tiles h, h + kSplit, ..., so that the causal
// triangle's work (in a stripe's first tiles) falls on every warp alike.
struct WarpPart {
  int a, h;
  __device__ __forceinline__ int r0() const { return kSub * a; }
};
__device__ __forceinline__ WarpPart warp_part() {
  const int w = static_cast<int>(threadIdx.x / 32);
  return {w / kSplit, w % kSplit};
}

// The columns of a warp's 8-column tiles: tile n covers first + n step .. + 7.
struct Columns {
  int first, step;
  __device__ __forceinline__ int of(const FragmentLane& l, int n, int e) const {
    return first + step * n + 2 * l.t + (e & 1);
  }
};
__device__ __forceinline__ Columns channel_columns(const WarpPart& w) { return {kWidth / kSplit * w.h, 8}; }
__device__ __forceinline__ Columns stripe_columns(const WarpPart& w) { return {8 * w.h, 8 * kSplit}; }

// The warp's local tiles [lo, hi) among a stripe's global tiles [global_lo, global_hi).
struct TileRange {
  int lo, hi;
};
__device__ __forceinline__ TileRange local_tiles(int global_lo, int global_hi, const WarpPart& w) {
  auto first_at_or_after = [&](int g) { return g <= w.h ? 0 : (g - w.h + kSplit - 1) / kSplit; };
  return {first_at_or_after(global_lo), first_at_or_after(global_hi)};
}

// exp(x) in T for a double x, to T's precision: in float32 the exponent's low part (what rounding x
// to float would lose) is applied as 1 + lo, so that an x of -60 still gives a factor accurate to
// float rounding rather than to the ~4e-6 of the rounded exponent.
template <class T>
__device__ __forceinline__ T exp_to(double x) {
  if constexpr (std::is_same_v<T, double>) {
    return exp(x);
  } else {
    const float hi = static_cast<float>(x);
    return expf(hi) * (1.0f + static_cast<float>(x - static_cast<double>(hi)));
  }
}

// One side's cumulative log decays in shared memory.
template <class T>
struct Side {
  const double* log;  // (kChunk, kLogPitch) per channel, (kChunk) one per step, unused without decay
  int mode;
  __device__ __forceinline__ double at(int position, int channel) const {
    if (mode == kChannelDecay) return log[position * Geometry<T>::kLogPitch + channel];
    return mode == kScalarDecay ? log[position] : 0.0;
  }
};

// x as the products take it from a shared tile or an operand function: rounded to TF32 (to nearest)
// when they run on the TF32 tensor cores, as it is otherwise.
template <Products kProducts, class T>
__device__ __forceinline__ T product_operand(T x) {
  if constexpr (kProducts == Products::kTF32) return to_tf32(x);
  else return x;
}

template <int NT, class T>
__device__ __forceinline__ void zero(T (&acc)[NT][4]) {
#pragma unroll
  for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = T(0);
}

// acc (the warp's 16 rows x its NT tiles of a result's columns, accumulator layout) += A B over k
// in [0, K) (K a multiple of 16), for its tiles n in [n_lo, n_hi) (warp-uniform bounds). A and B
// are given elementwise: a(row, k) with row 0..15, b(k, column); for TF32, already rounded
// (product_operand).
// kPairedK (TF32): lane t's two k-slots of an mma take k = 2t and 2t + 1 rather than t and t + 4
// (any numbering of the contraction gives the same sum). For operands whose k runs down the rows
// of a shared tile with rows of 4 mod 32 words, lanes then read 8 different rows 2t, 2t + 1 and 8
// columns g: 32 different banks, where t and t + 4 would put two lanes in one bank. bfloat16's
// k-slots are paired by the fragment layout itself (2t, 2t + 1 and 2t + 8, 2t + 9: mma.cuh).
template <Products kProducts, bool kPairedK = false, int NT, class T, class FA, class FB>
__device__ __forceinline__ void warp_product(T (&acc)[NT][4], int K, const Columns& cols, int n_lo, int n_hi,
                                             const FA& a, const FB& b) {
  static_assert(kProducts == Products::kExact || std::is_same_v<T, float>,
                "the tensor cores take float32 tiles (rounded to TF32 or bfloat16)");
  const FragmentLane l = fragment_lane();
  if constexpr (kProducts == Products::kTF32) {
    const int k_first = kPairedK ? 2 * l.t : l.t, k_second = kPairedK ? 2 * l.t + 1 : l.t + 4;
#pragma unroll 2
    for (int k0 = 0; k0 < K; k0 += 8) {
      const float af[4] = {a(l.g, k0 + k_first), a(l.g + 8, k0 + k_first), a(l.g, k0 + k_second),
                           a(l.g + 8, k0 + k_second)};
#pragma unroll
      for (int n = 0; n < NT; ++n)
        if (n >= n_lo && n < n_hi) {
          const int col = cols.first + cols.step * n + l.g;
          mma_tf32(acc[n], af, b(k0 + k_first, col), b(k0 + k_second, col));
        }
    }
  } else if constexpr (kProducts == Products::kBF16) {
    for (int k0 = 0; k0 < K; k0 += 16) {
      const int k1 = k0 + 2 * l.t, k2 = k1 + 8;  // the low k of the fragment's two pairs
      const uint32_t af[4] = {pack_bf16(a(l.g, k1), a(l.g, k1 + 1)), pack_bf16(a(l.g + 8, k1), a(l.g + 8, k1 + 1)),
                              pack_bf16(a(l.g, k2), a(l.g, k2 + 1)), pack_bf16(a(l.g + 8, k2), a(l.g + 8, k2 + 1))};
#pragma unroll
      for (int n = 0; n < NT; ++n)
        if (n >= n_lo && n < n_hi) {
          const int col = cols.first + cols.step * n + l.g;
          mma_bf16(acc[n], af, pack_bf16(b(k1, col), b(k1 + 1, col)), pack_bf16(b(k2, col), b(k2 + 1, col)));
        }
    }
  } else {
    for (int k = 0; k < K; ++k) {
      const T a0 = a(l.g, k), a1 = a(l.g + 8, k);
#pragma unroll
      for (int n = 0; n < NT; ++n)
        if (n >= n_lo && n < n_hi) {
          const int col = cols.first + cols.step * n + 2 * l.t;
          const T b0 = b(k, col), b1 = b(k, col + 1);
          acc[n][0] += a0 * b0;
          acc[n][1] += a0 * b1;
          acc[n][2] += a1 * b0;
          acc[n][3] += a1 * b1;
        }
    }
  }
}

// sum_c X[t][c] Y[s][c] exp(L_t,c - L_s,c) for s <= t: one score, elementwise.
template <class T>
__device__ __forceinline__ T decayed_dot(const T* X, const T* Y, const Side<T>& side, int t, int s) {
  constexpr int P = Geometry<T>::kPitch, LP = Geometry<T>::kLogPitch;
  const T *x = X + t * P, *y = Y + s * P;
  T sum = 0;
  if (side.mode == kChannelDecay) {
    const double *lt = side.log + t * LP, *ls = side.log + s * LP;
    for (int c = 0; c < kWidth; ++c) sum += x[c] * y[c] * exp_to<T>(lt[c] - ls[c]);
    return sum;
  }
  for (int c = 0; c < kWidth; ++c) sum += x[c] * y[c];
  return side.mode == kScalarDecay ? sum * exp_to<T>(side.log[t] - side.log[s]) : sum;
}

// A stripe of a causal score matrix, written to `stripe` (16 x kStripePitch, the rows of stripe a)
// with the s = t terms in diag[0..15], by the stripe's warps (each its tiles; a block-wide barrier
// before, so that the previous stripe is read, and after, so that the whole stripe is written):
//   rows t = 16 a + r, stripe[r][s] = S[t][s] for s < t, 0 for s >= t (as the products take it:
//   product_operand),
//   S[t][s] = sum_c X[t][c] Y[s][c] exp(L_t,c - L_s,c).
// The block's stripes lie one after another, so once every stripe is written they hold the whole
// matrix, rows t at stripes + t kStripePitch; the anti-causal products read it transposed
// (decayed_product) instead of computing it again. Every warp of the block must call it.
template <Products kProducts, class T>
__device__ void score_stripe(T* stripe, T* diag, const T* X, const T* Y, const Side<T>& side, const WarpPart& w) {
  using G = Geometry<T>;
  constexpr int P = G::kPitch, LP = G::kLogPitch, NT = G::kStripeTiles;
  const FragmentLane l = fragment_lane();
  const int a = w.a, r0 = w.r0();
  const Columns cols = stripe_columns(w);
  // Global column tiles: those of sub-blocks 0..a.
  const int diag_lo = 2 * a;
  const TileRange all = local_tiles(0, diag_lo + 2, w);
  __syncthreads();  // the stripe's previous contents are read
  T acc[NT][4];
  zero(acc);
  auto global_tile = [&](int n) { return w.h + kSplit * n; };
  if (side.mode == kChannelDecay) {
    // Below the diagonal, through the reference point ref, the last position before the row's
    // sub-block (see the file's header).
    const TileRange off = local_tiles(0, diag_lo, w);
    if (off.hi > off.lo) {
      const double* ref = side.log + (r0 - 1) * LP;
      const double* L = side.log;
      warp_product<kProducts>(
          acc, kWidth, cols, off.lo, off.hi,
          [&](int r, int c) {
            return product_operand<kProducts>(X[(r0 + r) * P + c] * exp_to<T>(L[(r0 + r) * LP + c] - ref[c]));
          },
          [&](int c, int s) { return product_operand<kProducts>(Y[s * P + c] * exp_to<T>(ref[c] - L[s * LP + c])); });
    }
    // The diagonal sub-block, elementwise.
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      if (global_tile(n) / 2 != a) continue;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = r0 + fragment_row(l, e), s = cols.of(l, n, e);
        acc[n][e] = s < t ? decayed_dot(X, Y, side, t, s) : T(0);
        if (s == t) diag[t - r0] = decayed_dot(X, Y, Side<T>{side.log, kNoDecay}, t, t);
      }
    }
  } else {
    warp_product<kProducts>(acc, kWidth, cols, all.lo, all.hi, [&](int r, int c) { return X[(r0 + r) * P + c]; },
                               [&](int c, int s) { return Y[s * P + c]; });
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = r0 + fragment_row(l, e), s = cols.of(l, n, e);
        if (s == t) diag[t - r0] = acc[n][e];
        acc[n][e] = s >= t                        ? T(0)
                    : side.mode == kScalarDecay ? acc[n][e] * exp_to<T>(side.log[t] - side.log[s])
                                                : acc[n][e];
      }
  }
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      stripe[fragment_row(l, e) * G::kStripePitch + cols.of(l, n, e)] = product_operand<kProducts>(acc[n][e]);
  __syncthreads();
}

// out (the warp's 16 rows x its channel tiles) += the decayed product of a causal score matrix S
// (as the block's score_stripe calls left it in `scores`, s = t terms excluded) with Y:
//   causal        rows t = 16 a + r:  out[r][c] += sum_{s < t} S[t][s] Y[s][c] exp(L_t,c - L_s,c)
//   anti-causal   rows s = 16 a + r:  out[r][c] += sum_{t > s} S[t][s] Y[t][c] exp(L_t,c - L_s,c)
// The causal product reads the warp's own stripe, the anti-causal one the matrix transposed.
// The contraction runs down Y's rows: paired k-slots (warp_product).
template <Products kProducts, bool kCausal, class T>
__device__ void decayed_product(T (&out)[kChannelTiles][4], const T* scores, const T* Y, const Side<T>& side,
                                const WarpPart& w) {
  using G = Geometry<T>;
  constexpr int P = G::kPitch, LP = G::kLogPitch, SP = G::kStripePitch;
  const FragmentLane l = fragment_lane();
  const int r0 = w.r0();
  const Columns cols = channel_columns(w);
  // S at the warp's row r (0..15) and the position p of the other index.
  auto score = [&](int r, int p) { return kCausal ? scores[(r0 + r) * SP + p] : scores[p * SP + r0 + r]; };
  // Positions of the stripe's columns that can be non-zero: causal [0, r0 + kSub), anti-causal [r0, kChunk).
  const int k_begin = kCausal ? 0 : r0, k_end = kCausal ? r0 + kSub : G::kChunk;
  if (side.mode != kChannelDecay) {
    const double* L = side.log;
    const bool scalar = side.mode == kScalarDecay;
    warp_product<kProducts, true>(
        out, k_end - k_begin, cols, 0, kChannelTiles,
        [&](int r, int k) {
          const int p = k_begin + k, row = r0 + r;
          const T s = score(r, p);
          if (!scalar || s == T(0)) return s;
          return product_operand<kProducts>(kCausal ? s * exp_to<T>(L[row] - L[p]) : s * exp_to<T>(L[p] - L[row]));
        },
        [&](int k, int c) { return Y[(k_begin + k) * P + c]; });
    return;
  }
  const double* L = side.log;
  // The sub-blocks off the diagonal, through the reference point: causal, the positions
  // [0, r0) with ref = r0 - 1; anti-causal, [r0 + kSub, kChunk) with ref = r0 + kSub - 1.
  const int off_begin = kCausal ? 0 : r0 + kSub, off_end = kCausal ? r0 : G::kChunk;
  if (off_end > off_begin) {
    const double* ref = L + (kCausal ? r0 - 1 : r0 + kSub - 1) * LP;
    T tmp[kChannelTiles][4];
    zero(tmp);
    warp_product<kProducts, true>(
        tmp, off_end - off_begin, cols, 0, kChannelTiles, [&](int r, int k) { return score(r, off_begin + k); },
        [&](int k, int c) {
          const int p = off_begin + k;
          return product_operand<kProducts>(Y[p * P + c] *
                                            exp_to<T>(kCausal ? ref[c] - L[p * LP + c] : L[p * LP + c] - ref[c]));
        });
#pragma unroll
    for (int n = 0; n < kChannelTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = r0 + fragment_row(l, e), c = cols.of(l, n, e);
        out[n][e] += tmp[n][e] * exp_to<T>(kCausal ? L[row * LP + c] - ref[c] : ref[c] - L[row * LP + c]);
      }
  }
  // The diagonal sub-block, elementwise.
#pragma unroll
  for (int n = 0; n < kChannelTiles; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = fragment_row(l, e), row = r0 + r, c = cols.of(l, n, e);
      const double lr = L[row * LP + c];
      T sum = 0;
      if (kCausal)
        for (int s = r0; s < row; ++s) sum += score(r, s) * Y[s * P + c] * exp_to<T>(lr - L[s * LP + c]);
      else
        for (int t = row + 1; t < r0 + kSub; ++t) sum += score(r, t) * Y[t * P + c] * exp_to<T>(L[t * LP + c] - lr);
      out[n][e] += sum;
    }
}

}  // namespace linea::cuda::chunked
