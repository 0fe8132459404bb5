#pragma once
// Warp-level building blocks of the chunked gated-linear-attention kernels (chunked_scan_kernels.cuh).
//
// A block works on one chunk of kChunk positions of one sequence, with tiles of the chunk's rows
// in shared memory: q, k, v, ... as (positions x channels), kWidth = 64 channels of each, rows
// padded to kPitch. Warp a owns the 16 positions of sub-block a (positions 16 a .. 16 a + 15):
// they are the rows of every product it computes, in the mma accumulator layout (mma.cuh), and
// the columns are 64 channels or the chunk's positions.
//
// A "side" is one dim of the state with its log decays: the key side (gk, over the key channels)
// or the value side (gv, over the value channels). Its decays are kept as cumulative sums over the
// chunk in double, L_t = sum of g over the chunk's positions 0..t (<= 0, non-increasing in t), so
// that the decay from position s to position t > s is exp(L_t - L_s), and the difference of two
// sums is the sum over the steps between them to double precision (in float32, a difference of two
// sums near -1000 would keep only ~1e-4 of an exponent near 0).
//
// Two kinds of products, each causal (rows t, columns s < t) or anti-causal (rows s, columns
// t > s, the adjoint the backward needs):
//   scores   S[t][s] = sum_c X[t][c] Y[s][c] exp(L_t,c - L_s,c)   (a contraction over the side)
//   decayed  out[t][c] += sum_s S[t][s] Y[s][c] exp(L_t,c - L_s,c)  (a contraction over positions)
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
// Products are computed by warp_product in one of two ways with one accumulator layout: on the
// tensor cores (mma.sync, TF32 operands rounded as they are loaded, float32 accumulation), or
// exactly (fused multiply-adds in the element type, for float32 with TF32 off and for float64).
#include <cstdint>
#include <type_traits>

#include "cuda/kernels/mma.cuh"

namespace linea::cuda::chunked {

enum DecayMode : int { kNoDecay = 0, kScalarDecay = 1, kChannelDecay = 2 };

constexpr int kWidth = 64;  // channels of a tile: dk and dv are cut into tiles of at most 64
constexpr int kSub = 16;    // positions of a sub-block: one warp's rows, the mma's M

template <class T>
struct Geometry {
  // float64 runs shorter chunks: its tiles take twice the shared memory.
  static constexpr int kChunk = sizeof(T) == 4 ? 64 : 32;
  static constexpr int kStripes = kChunk / kSub;   // warps of a per-chunk block
  static constexpr int kThreads = 32 * kStripes;
  static constexpr int kPitch = kWidth + 4;        // elements per shared row of a (positions x channels) tile
  static constexpr int kStripePitch = kChunk + 4;  // elements per shared row of a score stripe
  static constexpr int kTiles = kChunk / 8;        // 8-column tiles across a score stripe
  static constexpr int kLogPitch = kWidth;         // doubles per shared row of cumulative log decays
};

// exp(x) in T for a double x <= 0, to T's precision: in float32 the exponent's low part (what
// rounding x to float would lose) is applied as 1 + lo, so that an x of -60 still gives a factor
// accurate to float rounding rather than to the ~4e-6 of the rounded exponent.
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

template <int NT, class T>
__device__ __forceinline__ void zero(T (&acc)[NT][4]) {
#pragma unroll
  for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = T(0);
}

// acc (the warp's 16 rows x 8 NT columns, accumulator layout) += A B over k in [0, K) (K a
// multiple of 8), for the 8-column tiles n in [n_lo, n_hi) (warp-uniform bounds). A and B are given
// elementwise: a(row, k) with row 0..15, b(k, col).
template <bool kTensorCores, int NT, class T, class FA, class FB>
__device__ __forceinline__ void warp_product(T (&acc)[NT][4], int K, int n_lo, int n_hi, const FA& a, const FB& b) {
  static_assert(!kTensorCores || std::is_same_v<T, float>, "the tensor cores take float32 (as TF32)");
  const FragmentLane l = fragment_lane();
  if constexpr (kTensorCores) {
    for (int k0 = 0; k0 < K; k0 += 8) {
      const float af[4] = {to_tf32(a(l.g, k0 + l.t)), to_tf32(a(l.g + 8, k0 + l.t)), to_tf32(a(l.g, k0 + l.t + 4)),
                           to_tf32(a(l.g + 8, k0 + l.t + 4))};
#pragma unroll
      for (int n = 0; n < NT; ++n)
        if (n >= n_lo && n < n_hi)
          mma_tf32(acc[n], af, to_tf32(b(k0 + l.t, 8 * n + l.g)), to_tf32(b(k0 + l.t + 4, 8 * n + l.g)));
    }
  } else {
    for (int k = 0; k < K; ++k) {
      const T a0 = a(l.g, k), a1 = a(l.g + 8, k);
#pragma unroll
      for (int n = 0; n < NT; ++n)
        if (n >= n_lo && n < n_hi) {
          const T b0 = b(k, 8 * n + 2 * l.t), b1 = b(k, 8 * n + 2 * l.t + 1);
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

// The warp's stripe of a score matrix, written to `stripe` (16 x kStripePitch, the rows of sub-block
// a) with the s = t terms in diag[0..15]:
//   causal        rows t = 16 a + r, stripe[r][s] = S[t][s] for s < t, 0 for s >= t,
//                 S[t][s] = sum_c X[t][c] Y[s][c] exp(L_t,c - L_s,c);
//   anti-causal   rows s = 16 a + r, stripe[r][t] = S[t][s] for t > s, 0 for t <= s.
// So the anti-causal stripe of (X, Y) is the transpose of the causal score matrix, by rows of Y.
template <bool kTensorCores, bool kCausal, class T>
__device__ void score_stripe(T* stripe, T* diag, const T* X, const T* Y, const Side<T>& side, int a) {
  using G = Geometry<T>;
  constexpr int P = G::kPitch, LP = G::kLogPitch, NT = G::kTiles;
  const FragmentLane l = fragment_lane();
  const int r0 = kSub * a;  // the stripe's first row position
  // Column tiles: causal, those of sub-blocks 0..a; anti-causal, those of sub-blocks a..last.
  const int diag_lo = 2 * a, n_lo = kCausal ? 0 : diag_lo, n_hi = kCausal ? diag_lo + 2 : NT;
  __syncwarp();  // every lane is done reading the previous stripe and diag
  T acc[NT][4];
  zero(acc);
  // The row operand is X (causal) or Y (anti-causal), the column operand the other.
  const T* rows = kCausal ? X : Y;
  const T* cols = kCausal ? Y : X;
  if (side.mode == kChannelDecay) {
    // Below the diagonal, through the reference point ref (see the file's header).
    if (kCausal ? a > 0 : a < G::kStripes - 1) {
      const double* ref = side.log + (kCausal ? r0 - 1 : r0 + kSub - 1) * LP;
      const double* L = side.log;
      if (kCausal)
        warp_product<kTensorCores>(
            acc, kWidth, 0, diag_lo,
            [&](int r, int c) { return rows[(r0 + r) * P + c] * exp_to<T>(L[(r0 + r) * LP + c] - ref[c]); },
            [&](int c, int s) { return cols[s * P + c] * exp_to<T>(ref[c] - L[s * LP + c]); });
      else
        warp_product<kTensorCores>(
            acc, kWidth, diag_lo + 2, NT,
            [&](int r, int c) { return rows[(r0 + r) * P + c] * exp_to<T>(ref[c] - L[(r0 + r) * LP + c]); },
            [&](int c, int t) { return cols[t * P + c] * exp_to<T>(L[t * LP + c] - ref[c]); });
    }
    // The diagonal sub-block, elementwise.
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      if (n / 2 != a) continue;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = r0 + fragment_row(l, e), col = fragment_col(l, n, e);
        const int t = kCausal ? row : col, s = kCausal ? col : row;
        acc[n][e] = s < t ? decayed_dot(X, Y, side, t, s) : T(0);
        if (s == t) diag[row - r0] = decayed_dot(X, Y, Side<T>{side.log, kNoDecay}, t, t);
      }
    }
  } else {
    warp_product<kTensorCores>(acc, kWidth, n_lo, n_hi, [&](int r, int c) { return rows[(r0 + r) * P + c]; },
                               [&](int c, int s) { return cols[s * P + c]; });
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = r0 + fragment_row(l, e), col = fragment_col(l, n, e);
        const int t = kCausal ? row : col, s = kCausal ? col : row;
        if (s == t) diag[row - r0] = acc[n][e];
        acc[n][e] = s >= t                        ? T(0)
                    : side.mode == kScalarDecay ? acc[n][e] * exp_to<T>(side.log[t] - side.log[s])
                                                : acc[n][e];
      }
  }
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) stripe[fragment_row(l, e) * G::kStripePitch + fragment_col(l, n, e)] = acc[n][e];
  __syncwarp();
}

// out (the warp's 16 rows x 64 channels) += the decayed product of the warp's score stripe (as
// score_stripe left it, s = t terms excluded) with Y:
//   causal        rows t = 16 a + r:  out[r][c] += sum_{s < t} stripe[r][s] Y[s][c] exp(L_t,c - L_s,c)
//   anti-causal   rows s = 16 a + r:  out[r][c] += sum_{t > s} stripe[r][t] Y[t][c] exp(L_t,c - L_s,c)
template <bool kTensorCores, bool kCausal, class T>
__device__ void decayed_product(T (&out)[8][4], const T* stripe, const T* Y, const Side<T>& side, int a) {
  using G = Geometry<T>;
  constexpr int P = G::kPitch, LP = G::kLogPitch, SP = G::kStripePitch;
  const FragmentLane l = fragment_lane();
  const int r0 = kSub * a;
  // Positions of the stripe's columns that can be non-zero: causal [0, r0 + kSub), anti-causal [r0, kChunk).
  const int k_begin = kCausal ? 0 : r0, k_end = kCausal ? r0 + kSub : G::kChunk;
  if (side.mode != kChannelDecay) {
    const double* L = side.log;
    const bool scalar = side.mode == kScalarDecay;
    warp_product<kTensorCores>(
        out, k_end - k_begin, 0, 8,
        [&](int r, int k) {
          const int p = k_begin + k, row = r0 + r;
          const T s = stripe[r * SP + p];
          if (!scalar || s == T(0)) return s;
          return kCausal ? s * exp_to<T>(L[row] - L[p]) : s * exp_to<T>(L[p] - L[row]);
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
    T tmp[8][4];
    zero(tmp);
    warp_product<kTensorCores>(
        tmp, off_end - off_begin, 0, 8, [&](int r, int k) { return stripe[r * SP + off_begin + k]; },
        [&](int k, int c) {
          const int p = off_begin + k;
          return Y[p * P + c] * exp_to<T>(kCausal ? ref[c] - L[p * LP + c] : L[p * LP + c] - ref[c]);
        });
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = r0 + fragment_row(l, e), c = fragment_col(l, n, e);
        out[n][e] += tmp[n][e] * exp_to<T>(kCausal ? L[row * LP + c] - ref[c] : ref[c] - L[row * LP + c]);
      }
  }
  // The diagonal sub-block, elementwise.
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = fragment_row(l, e), row = r0 + r, c = fragment_col(l, n, e);
      const double lr = L[row * LP + c];
      T sum = 0;
      if (kCausal)
        for (int s = r0; s < row; ++s) sum += stripe[r * SP + s] * Y[s * P + c] * exp_to<T>(lr - L[s * LP + c]);
      else
        for (int t = row + 1; t < r0 + kSub; ++t) sum += stripe[r * SP + t] * Y[t * P + c] * exp_to<T>(L[t * LP + c] - lr);
      out[n][e] += sum;
    }
}

}  // namespace linea::cuda::chunked
