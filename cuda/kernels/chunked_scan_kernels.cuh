#pragma once
// The gated linear attention recurrence (tensor/backend.h: gated_scan) in chunked form, with the
// products on the tensor cores: what the linear layers run on CUDA by default. The sequential
// kernels of gated_scan.cu compute the same thing one step at a time (ScanAlgorithm::Sequential).
// The kernels are templates over the precision; chunked_scan_{tf32,bf16,f32,f64}.cu instantiate
// one precision each (so that they compile in parallel) and chunked_scan.cu picks one.
//
// The recurrence, per sequence (batch element and head), with Dv_t = diag(exp(gv_t)) and
// Dk_t = diag(exp(gk_t)):  S_t = Dv_t S_{t-1} Dk_t + v_t k_t^T,  o_t = S_t q_t.
//
// ---- Tiles. Rows of S (value channels) never mix, nor do its columns (key channels): a tile of
// up to 64 x 64 of S evolves on its own, and o is the sum over key tiles of each tile's output. So
// dk and dv are cut into tiles of kWidth = 64 and every kernel works on one (value tile, key
// tile) pair, a "sub-problem"; sums across tiles (o over key tiles; dq, dk over value tiles; dv
// over key tiles) go through per-tile partial outputs added afterwards in a fixed order. With
// head dims up to 64 there is one tile and outputs are written directly.
//
// ---- Chunks. Time is cut into chunks of C = 64 positions (32 in float64). Within a chunk, with
// L_t the log decays summed from the chunk's start through t (per side, chunked_scan.cuh) and h the
// state before the chunk:
//   o_t   = exp(Lv_t) * (h (q_t * exp(Lk_t)))  +  A_tt v_t
//           + sum_{s<t} A_ts (v_s * exp(Lv_t - Lv_s)),    A_ts = sum_i q_ti k_si exp(Lk_ti - Lk_si)
//   h'    = diag(exp(Lv_last)) h diag(exp(Lk_last)) + sum_s (v_s exp(Lv_last - Lv_s)) (k_s exp(Lk_last - Lk_s))^T
// Forward: chunk_output, a block per chunk (or persistent blocks taking chunk after chunk:
// for_block_chunk), computes every chunk's outputs in parallel from its inputs and the state
// before it. The state passes from chunk to chunk in one of two ways
// (ScanStatePass, cuda/backend.h): in two kernels of its own first (chunk_updates computes every
// chunk's own update of the state, the sum in h' above, in parallel; state_scan carries the state
// through the chunks, storing the state before every chunk and the final one), or inside
// chunk_output, each block computing its chunk's update and handing the state on to the next
// chunk's block (pass_state, chunk_chain.cuh), the latter whenever a launch has chains enough to
// hide the latency of its links (passes_along_chain). Either way the only sequential work is
// elementwise. No T x T matrix, no atomics (the chain's counters only order the blocks).
// Why 64 in float32: chunks of 32 (half the shared memory, two blocks per SM in float32 with one
// decaying side) measured slower on an H100 (forward+backward at B=8, H=8, d=64, GLA gate: 0.85
// against 0.78 ms at T = 1k, 3.17 against 2.81 ms at 4k): twice the chunks means twice the state
// traffic and state loads per chunk, which the second block per SM did not win back.
//
// ---- Backward, with dh' = dL/dh' the gradient reaching the state after the chunk (from later
// chunks and the final state):
//   dh      = diag(exp(Lv_last)) dh' diag(exp(Lk_last)) + sum_t (do_t exp(Lv_t)) (q_t exp(Lk_t))^T
//   dq_t    = exp(Lk_t) * (h^T (do_t exp(Lv_t))) + sum_{s<=t} dA_ts k_s exp(Lk_t - Lk_s),
//             dA_ts = sum_j do_tj v_sj exp(Lv_tj - Lv_sj)
//   dk_s    = sum_{t>=s} dA_ts q_t exp(Lk_t - Lk_s) + exp(Lk_last - Lk_s) * (dh'^T (v_s exp(Lv_last - Lv_s)))
//   dv_s    = sum_{t>=s} A_ts do_t exp(Lv_t - Lv_s) + exp(Lv_last - Lv_s) * (dh' (k_s exp(Lk_last - Lk_s)))
// dh' passes back through the chunks the same two ways (the first line above): chunk_updates and
// state_scan run again, in reverse (and for the states too when the forward did not keep them:
// Memory below), or inside chunk_gradient; chunk_gradient does every chunk in parallel.
// The decay gradients: the usual chunked form (FlashLinearAttention's) is
//   dgk_t = sum_{u>=t} (q_u dq_u - k_u dk_u) + sum_j dh' * h'
// but both terms of the difference contain every pair (u, s) with t <= s <= u, the large
// undecayed s = u terms among them, while the result only has the pairs that span t (s < t <= u):
// with closed gates it is the difference of two numbers near 1 that should be near 0 (in float64
// 1e-6 relative error at the gate floor, in float32 none left). chunk_gradient forms it from the
// spanning pairs and the remaining decayed ones:
//   dgk_t = sum_{u>=t} (q_u dq~_u - k_u dk~_u) + sum_{s<t} k_s dk^state_s + sum_j dh' * (Dv_last h Dk_last)
// with dq~ and dk~ the intra-chunk parts without their s = u terms (the score stripes keep those
// apart) and dk^state the second term of dk_s; likewise dgv with o~ do, v dv~ and v dv^state.
//
// ---- Two ways through a chunk. Most chunks decay little: when every channel's decay over the
// whole chunk is at least exp(-kMildLogDecay), the decays factor out of the products exactly:
// exp(L_t - L_s) = exp(L_t) exp(-L_s), with every factor between exp(-64) and exp(64). The
// kernels then rescale the operands once (q+ = q exp(Lk_t), k- = k exp(-Lk_s), v- = v exp(-Lv_s),
// do+ = do exp(Lv_t), dh' exp(Lv_last + Lk_last)), every product is a plain masked matrix product
// of shared tiles, and each output is rescaled once at the end: o = exp(Lv_t) (A+ v- + q+ h^T ...),
// dv = exp(-Lv_s) (...), and so on; the decay-gradient terms need no rescaling at all (q dq~ =
// q+ times dq~'s bracket). Chunks that decay more (gates near 0) go through the sub-blocks of
// chunked_scan.cuh, where no factor exceeds 1.
//
// ---- Precision. On the tensor cores (float32 while TF32 is on) every product's operands are
// rounded to TF32 (once, as the tiles are written: chunked_scan.cuh, product_operand) and summed in
// float32 (for a bfloat16 scan, rounded to bfloat16 for the m16n8k16 products, from float32 tiles:
// the tiles, sums and states are float32 either way; its bfloat16 q, k, v, dout are widened into
// the tiles as they are loaded and o, dq, dk, dv rounded once as they are stored, Operand); with
// TF32 off the same kernels run exact float32 fused multiply-adds, and float64 always does. States
// are float32 (float64) throughout. Log decays are summed per chunk more precisely than the element
// type (log_decay_sum.cuh: in double, or in float32 as pairs of floats), each step floored where
// its exponential is 0 in the element type (a closed gate gives exactly 0 as it does step by step);
// every factor is accurate to the element type. A chunk that is not mild keeps its sums as doubles
// in shared memory (chunked_scan.cuh: Side, exp_to).
//
// ---- Memory. When a backward is to come, the forward keeps the states it computed (the state
// before every chunk and the final one: 64 x 64 per sub-problem, sequence and chunk, in float32
// 16 KB per 64 positions, like one 64-wide activation) and hands them to autograd, which passes
// them back; the backward then computes only the gradients' pass. Measured on an H200 at the
// standard model (B=16, T=1024, 8 heads of 64, 6 layers) with the state pass in kernels of its
// own: recomputing the states in the backward cost 0.07 ms per layer and step (chunk_updates 158
// -> 108 us, state_scan 41 -> 20 us); keeping them holds 35 MiB per layer from the forward to the
// backward (the step's peak 5.53 -> 5.75 GiB), and the kernel pair's own peak drops (2376 -> 2088
// MiB at B=8, H=8, T=16k), the backward no longer allocating states of its own. Without a backward
// (inference) the states are scratch, handed back when the forward returns. Passed between the
// blocks, the gradients and an inference's states need only one slot per sequence (pass_state),
// and a backward without kept states runs chunk_output again without its output.

#include <algorithm>
#include <memory>
#include <type_traits>

#include "cuda/backend.h"
#include "cuda/buffer.h"
#include "cuda/cuda_backend.h"
#include "cuda/kernels/chain_order.h"
#include "cuda/kernels/chunk_chain.cuh"
#include "cuda/kernels/chunked_scan.cuh"
#include "cuda/kernels/chunked_scan.h"
#include "cuda/kernels/cp_async.cuh"
#include "cuda/kernels/log_decay_sum.cuh"
#include "cuda/launch.cuh"
#include "cuda/stream.h"

namespace linea::cuda::chunked {

// The largest decay (as -log) a chunk may have in every channel for the kernels to factor the
// decays out of its products (the file's header): exp(64) is far from float32's overflow.
constexpr double kMildLogDecay = 64.0;

// A (B, H, T, width) tensor with a contiguous last dim: element (b, h, t, c) at
// ptr + b sb + h sh + t st + c. Outputs computed by several sub-problems go through partial sums
// `part` elements apart (part = 0: one sub-problem writes the tensor directly). `vectors`: every
// row starts on 16 bytes and the width is a multiple of 16 bytes, so rows load 16 bytes at a time.
// A bfloat16 scan's activations (q, k, v, dout) and results (o, dq, dk, dv) are bfloat16 tensors
// read and written in place (`narrow` instead of ptr, at the same element offsets, with T float):
// widened to float32 as they are loaded (exact) and rounded to nearest even as they are stored.
template <class T>
struct Operand {
  using Narrow = std::conditional_t<std::is_const_v<T>, const bfloat16, bfloat16>;
  T* ptr = nullptr;
  Narrow* narrow = nullptr;
  int64_t sb = 0, sh = 0, st = 0, part = 0;
  bool vectors = false;
  __host__ __device__ bool present() const { return ptr != nullptr || narrow != nullptr; }
  __device__ __forceinline__ int64_t offset(int64_t b, int64_t h, int64_t p, int64_t index) const {
    return index * part + b * sb + h * sh + p * st;
  }
  // Element e (an offset, channel included).
  __device__ __forceinline__ void store(int64_t e, std::remove_const_t<T> x) const {
    if (narrow != nullptr) narrow[e] = bfloat16(x);
    else ptr[e] = x;
  }
  // Elements e and e + 1 in one store: e even, in rows of whole vectors.
  __device__ __forceinline__ void store_pair(int64_t e, std::remove_const_t<T> x0, std::remove_const_t<T> x1) const {
    if (narrow != nullptr) {
      // x0 at the lower address
      const uint32_t bits = bfloat16(x0).bits | static_cast<uint32_t>(bfloat16(x1).bits) << 16;
      *reinterpret_cast<uint32_t*>(narrow + e) = bits;
    } else {
      using Pair = std::conditional_t<std::is_same_v<std::remove_const_t<T>, float>, float2, double2>;
      *reinterpret_cast<Pair*>(ptr + e) = Pair{x0, x1};
    }
  }
};

template <class T>
struct ScanArgs {
  Operand<const T> q, k, v, gk, gv, dout;                    // gk, gv, dout null where absent
  Operand<T> out, grad_q, grad_k, grad_v, grad_gk, grad_gv;  // null where not wanted
  const T *s0, *dfinal;                                      // (B, H, dv, dk) contiguous, or null (zeros)
  T *final_state, *dinitial;                                 // likewise, or null
  // kWidth x kWidth per chain (sub-problem and sequence) and slot: the states before each chunk
  // (and the final one), state_slots per chain; their gradients after each chunk, dstate_slots.
  // Passed between the blocks (kChain), a forward without a backward to come and the gradients
  // have none (null): the chain's slots carry them.
  T *states, *dstates;
  int64_t state_slots, dstate_slots;
  // ScanStatePass::kKernels: each chunk's own update of the state (U) and of its gradient (W),
  // and each chunk's exp(Lv_last), exp(Lk_last) (2 kWidth), from chunk_updates for state_scan.
  T *updates, *dupdates, *decays;
  // ScanStatePass::kChain: the launch's ticket counter and chain slots (chunk_chain.cuh); null otherwise.
  ChunkChain chain;
  int64_t heads, sequences, steps, dk, dv, chunks;
  int key_tiles, value_tiles, key_mode, value_mode;
};

// A block's sub-problem (value tile, key tile), sequence and chunk. Each sub-problem's sequences
// are "chains" of chunks, chain = sub_problem * sequences + seq, through which the state passes.
// When it passes between the per-chunk kernels' blocks (pass_state), a block's chunk comes from its
// ticket (chunk_chain.cuh): every chain's first chunk (the backward: its last), then every chain's
// second, and so on, so that the chunk before a block's own in its chain has the smaller ticket.
struct Place {
  int vt, kt;
  int64_t b, h, seq, chain, index;
};
// The place of chain `chain`'s index `index`.
template <class T>
__device__ __forceinline__ Place place_in_chain(const ScanArgs<T>& a, int64_t chain, int64_t index) {
  const int64_t seq = chain % a.sequences, sp = chain / a.sequences;
  return {static_cast<int>(sp / a.key_tiles), static_cast<int>(sp % a.key_tiles), seq / a.heads, seq % a.heads, seq,
          chain, index};
}
// A block's place from its number, block = chain * count + index (index: a chunk, or a part of the
// state for the scan over chunks).
template <class T>
__device__ __forceinline__ Place place_of(const ScanArgs<T>& a, int64_t count, int64_t block = blockIdx.x) {
  return place_in_chain(a, block / count, block % count);
}
// Every chain's chunks: a per-chunk launch's blocks of one chunk each, or its tickets.
template <class T>
__host__ __device__ __forceinline__ int64_t chunk_count(const ScanArgs<T>& a) {
  return static_cast<int64_t>(a.key_tiles) * a.value_tiles * a.sequences * a.chunks;
}
// Whether exactly one side decays (the GLA gate, a value-side gate): the whole block then takes
// that side's decays (factor_chunk), and chained launches run persistent blocks (persistent_blocks).
template <class T>
__host__ __device__ __forceinline__ bool one_side_decays(const ScanArgs<T>& a) {
  return (a.key_mode == kNoDecay) != (a.value_mode == kNoDecay);
}
// A per-chunk block's place from its ticket when the state passes between the blocks (pass_state).
template <class T>
__device__ __forceinline__ Place place_of_ticket(const ScanArgs<T>& a, unsigned ticket, bool backward) {
  const int64_t chains = static_cast<int64_t>(a.key_tiles) * a.value_tiles * a.sequences;
  const ChainPlace c = ticket_place(ticket, chains, a.chunks, backward);  // chain_order.h
  return place_in_chain(a, c.chain, c.chunk);
}

// The state tile of a chain's slot in a states buffer with `slots` per chain.
template <class T>
__device__ __forceinline__ T* state_tile(T* base, const Place& p, int64_t slots, int64_t slot) {
  return base + (p.chain * slots + slot) * kWidth * kWidth;
}

// Log decays at or below this give exactly exp = 0 in the element type.
template <class T>
__device__ __forceinline__ double log_decay_floor() {
  return sizeof(T) == 4 ? -110.0 : -1000.0;
}

// ---- loading ----------------------------------------------------------------------------------

// A thread's piece of a bfloat16 tile on its way into a float32 tile (load_tile): cp.async cannot
// widen, so the thread loads its 16 bytes (8 elements) into registers when the block issues its
// copies, and land(tile) widens them into the tile after the block's first wait (for the decays,
// which were issued first), so that these loads travel while the copies do.
struct NarrowPiece {
  uint4 raw{};
  int at = -1;  // the piece's first element in its tile; -1: no piece pending
  __device__ __forceinline__ void land(float* tile) const {
    if (at < 0) return;
    const uint32_t pairs[4] = {raw.x, raw.y, raw.z, raw.w};
    float x[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // the lower element of each pair goes low (mma.cuh: bf16_low)
      x[2 * i] = bf16_low(pairs[i]);
      x[2 * i + 1] = bf16_high(pairs[i]);
    }
    reinterpret_cast<float4*>(tile + at)[0] = make_float4(x[0], x[1], x[2], x[3]);
    reinterpret_cast<float4*>(tile + at)[1] = make_float4(x[4], x[5], x[6], x[7]);
  }
};

// Positions [p0, p0 + rows) x channels [c0, c0 + cols) of x (channels < width) for (b, h) into a
// shared tile with rows of P elements; zeros outside the sequence and the channels. Asynchronous
// when x's rows allow 16-byte copies (wait with cp_async_wait_all), else loads kUnroll elements
// per thread at a time. A bfloat16 operand whose rows allow it leaves the thread's piece to land
// (NarrowPiece: at most one a thread, the tiles having at most kChunk x kWidth elements); every
// other way returns an empty piece.
template <class T, int kThreads, int P>
__device__ NarrowPiece load_tile(T* __restrict__ dst, const Operand<const T>& x, const Place& p, int64_t p0, int rows,
                                 int64_t steps, int64_t c0, int cols, int64_t width) {
  const int64_t base = x.offset(p.b, p.h, 0, 0);
  if constexpr (std::is_same_v<T, float>) {
    static_assert(Geometry<float>::kChunk * kWidth / 8 <= kThreads, "one piece a thread");
    if (x.narrow != nullptr && x.vectors && cols % 8 == 0) {
      const int e = static_cast<int>(threadIdx.x), vcols = cols / 8;
      if (e >= rows * vcols) return {};
      const int r = e / vcols, c = 8 * (e % vcols);
      const int64_t pos = p0 + r, ch = c0 + c;
      NarrowPiece piece;
      piece.at = r * P + c;
      if (pos < steps && ch < width) piece.raw = __ldg(reinterpret_cast<const uint4*>(x.narrow + base + pos * x.st + ch));
      return piece;
    }
  }
  if (x.ptr != nullptr && x.vectors && cols % (16 / sizeof(T)) == 0) {
    constexpr int V = 16 / sizeof(T);
    const int vcols = cols / V;
    const T* __restrict__ from = x.ptr + base;
    for (int e = threadIdx.x; e < rows * vcols; e += kThreads) {
      const int r = e / vcols, c = V * (e % vcols);
      const int64_t pos = p0 + r, ch = c0 + c;
      const bool in = pos < steps && ch < width;
      cp_async16(dst + r * P + c, in ? from + pos * x.st + ch : from, in ? 16 : 0);
    }
    return {};
  }
  const auto element = [&](int64_t at) {
    return x.narrow != nullptr ? static_cast<T>(static_cast<float>(x.narrow[at])) : __ldg(x.ptr + at);
  };
  constexpr int kUnroll = 8;
  const int n = rows * cols;
  for (int e0 = threadIdx.x; e0 < n; e0 += kUnroll * kThreads) {
    T values[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int e = e0 + u * kThreads, r = e / cols, c = e % cols;
      const int64_t pos = p0 + r, ch = c0 + c;
      values[u] = e < n && pos < steps && ch < width ? element(base + pos * x.st + ch) : T(0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int e = e0 + u * kThreads;
      if (e < n) dst[(e / cols) * P + e % cols] = values[u];
    }
  }
  return {};
}

// One side's raw log decays over the chunk's positions: channels [c0, c0 + cols) into a tile, or
// for one decay per step a column (dst[r * P]).
template <class T, int kThreads, int P>
__device__ void load_decays(T* dst, const Operand<const T>& g, int mode, const Place& p, int64_t p0, int rows,
                            int64_t steps, int64_t c0, int cols, int64_t width) {
  if (mode == kChannelDecay) load_tile<T, kThreads, P>(dst, g, p, p0, rows, steps, c0, cols, width);
  else if (mode == kScalarDecay) load_tile<T, kThreads, P>(dst, g, p, p0, rows, steps, 0, 1, 1);
}

// A contiguous kWidth x kWidth state tile into shared rows of P (asynchronously).
template <class T, int kThreads, int P>
__device__ void load_state_tile(T* dst, const T* src) {
  constexpr int V = 16 / sizeof(T), vcols = kWidth / V;
  for (int e = threadIdx.x; e < kWidth * vcols; e += kThreads) {
    const int r = e / vcols, c = V * (e % vcols);
    cp_async16(dst + r * P + c, src + r * kWidth + c, 16);
  }
}

// A thread's share of the cumulative log decays: one channel of one side over kRows consecutive
// positions. With kSides = 2 the block's threads cover both sides' kWidth channels; with kSides = 1
// they all take the one side that decays (the GLA gate's key side, a value-side gate's value side),
// and the other side, without decays, has only its tiles to round (prepare_chunk). A warp's lanes
// take 32 neighbouring channels, so that their shared loads and stores fall in different banks, in
// kSegments segments of positions. With two sides they take alternate groups of four warps: a warp
// issues from the SM's scheduler of its number mod 4, so each scheduler has warps of both sides. In
// alternate pairs of warps the sides had two of the four, and when only one side decayed the other
// two idled: on an H200 the GLA gate's forward at T = 16k took 1.74-1.76 ms so and 1.61-1.62 with
// groups of four. With the whole block on the one decaying side, each thread has half the sums,
// factors and operands: its fwd+bwd took 4.27-4.34 ms against 4.60-4.64 (docs/benchmarks.md). One
// layout for every gate, each thread a channel of both sides, measured 5% slower for the GLA gate.
// The sums are LogDecaySums (log_decay_sum.cuh: double, or a pair of floats in a float32 scan),
// each step floored: L[i] is the sum from the chunk's start through position t0 + i, total the sum
// over the chunk. One decay per step (the raw tile's column 0) is summed by every channel's
// threads alike; a side without decay sums to 0.
// Each thread sums its own positions, then adds the totals of the segments before it: short
// independent chains, where a warp per channel and a shuffle scan across its lanes waited on one
// dependent double-precision step after another (a clock64 probe on an H200: 7,000 of a
// chunk_output block's 29,000 cycles; docs/benchmarks.md).
template <class T, int kThreads, int kSides = 2>
struct ColumnShare {
  static constexpr int kColumns = kSides * kWidth, kSegments = kThreads / kColumns;
  static constexpr int kRows = Geometry<T>::kChunk / kSegments;
  static_assert(kSides == 1 || kSides == 2, "one side or both");
  static_assert(kSegments * kColumns == kThreads && kRows * kSegments == Geometry<T>::kChunk, "whole shares");
  static_assert(kWidth == 64 && kThreads % 256 == 0, "whole groups of four warps a side (column_share)");
  bool key_side;
  int c, t0, mode;
  LogDecaySum<T> L[kRows];
  LogDecaySum<T> total;
  // exp(L_last): the channel's decay over the whole chunk (1 without decay).
  __device__ __forceinline__ T chunk_decay() const { return mode == kNoDecay ? T(1) : total.exp_up(); }
  // exp(L_last - L_i), the decay from position t0 + i to the chunk's end.
  __device__ __forceinline__ T to_end(int i) const { return mode == kNoDecay ? T(1) : total.minus(L[i]).exp_up(); }
  // exp(L_i), the decay from the chunk's start through position t0 + i.
  __device__ __forceinline__ T from_start(int i) const { return mode == kNoDecay ? T(1) : L[i].exp_up(); }
};

// The thread's ColumnShare of the raw decay tiles (load_decays: rows of P elements). `scratch`
// takes kThreads LogDecaySums (8 bytes each in float32 and float64); every thread of the block must
// call it (it holds a __syncthreads). With kSides = 1 every thread takes the side whose mode is not
// kNoDecay (key_side says which).
template <class T, int kThreads, int P, int kSides = 2>
__device__ ColumnShare<T, kThreads, kSides> column_share(const T* raw_k, int key_mode, const T* raw_v, int value_mode,
                                                         LogDecaySum<T>* scratch) {
  using S = ColumnShare<T, kThreads, kSides>;
  S x;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  // Two sides: warps 0-3 the key side, 4-7 the value side, 8-11 the key side again, and so on (see
  // above). side_warp is the warp's number among its side's warps.
  const int side_warp = kSides == 1 ? warp : warp % 4 + 4 * (warp / 8);
  const int segment = side_warp / 2;
  x.key_side = kSides == 1 ? key_mode != kNoDecay : warp / 4 % 2 == 0;
  x.c = 32 * (side_warp % 2) + lane;
  const int column = (x.key_side || kSides == 1 ? 0 : kWidth) + x.c;
  x.t0 = segment * S::kRows;
  x.mode = x.key_side ? key_mode : value_mode;
  const T* raw = (x.key_side ? raw_k : raw_v) + (x.mode == kScalarDecay ? 0 : x.c);
  LogDecaySum<T> sum;
#pragma unroll
  for (int i = 0; i < S::kRows; ++i) {
    if (x.mode != kNoDecay) sum.add(max(raw[(x.t0 + i) * P], static_cast<T>(log_decay_floor<T>())));
    x.L[i] = sum;
  }
  scratch[segment * S::kColumns + column] = sum;
  __syncthreads();
  LogDecaySum<T> before;
  combine_segments(scratch + column, S::kColumns, S::kSegments, segment, before, x.total);
#pragma unroll
  for (int i = 0; i < S::kRows; ++i) x.L[i] = x.L[i].plus(before);
  return x;
}

// ---- the states in passes of their own: each chunk's update, then a scan over the chunks -------
//
// ScanStatePass::kKernels (cuda/backend.h; by default for launches of few chains): the state pass
// as two kernels of its own. The other way, kChain, passes the state between the per-chunk kernels'
// blocks (pass_state below).
//
// The state after chunk n is  h_{n+1} = diag(ev_n) h_n diag(ek_n) + U_n  with ev_n = exp(Lv_last)
// and ek_n = exp(Lk_last) the chunk's decays and U_n = sum_s (v_s exp(Lv_last - Lv_s))
// (k_s exp(Lk_last - Lk_s))^T its own contribution; backward, the gradient before the chunk is
// dh_n = diag(ev_n) dh_{n+1} diag(ek_n) + W_n  with W_n = sum_t (do_t exp(Lv_t)) (q_t exp(Lk_t))^T.
// U_n and W_n need only chunk n's inputs: chunk_updates computes them for every chunk at once, on
// the tensor cores. What is left sequential is elementwise: state_scan walks the chunks with a few
// elements of the 64 x 64 state per thread, and no product or exponential on its critical path.
// Why not one kernel walking the chunks with the state on chip, as FlashLinearAttention's state
// passes do: it was built (three ways, the last warp-specialized) and measured slower on an H200,
// 877 us a pass against 615 + 201 here at B = 8, H = 8, d = 64, T = 16k. A chunk's decay factors,
// exact to float rounding (log_decay_sum.cuh), are most of its work; here they run in
// independent blocks at full occupancy, in a walk they sit on the sequential path
// (docs/benchmarks.md).

constexpr int kUpdateWarps = 4 * kSplit;  // chunk_updates: 16 rows x 64 / kSplit columns of the update per warp
constexpr int kScanThreads = 256;
constexpr int kScanBlocks = 4;   // state_scan blocks per (sub-problem, sequence): 1024 elements each

// Where chunk_updates leaves a chunk's update (U or W: kWidth x kWidth) and its decays (ev then
// ek: 2 kWidth), per sub-problem, sequence and chunk.
template <class T>
__device__ __forceinline__ T* update_tile(T* base, const ScanArgs<T>& a, const Place& p, int64_t chunk) {
  return state_tile(base, p, a.chunks, chunk);
}
template <class T>
__device__ __forceinline__ T* chunk_decays(T* base, const ScanArgs<T>& a, const Place& p, int64_t chunk) {
  return base + (p.chain * a.chunks + chunk) * 2 * kWidth;
}

// Both sides' factors over the chunk, applied in place: with L_t the decays summed from the
// chunk's start through t, rows of the side's `to_end` tile (null: none) are multiplied by
// exp(L_last - L_t) and rows of `from_start` (null: none) by exp(L_t); last[c] gets exp(L_last)
// (1 without decay). `scratch` takes kThreads LogDecaySums. The raw decays must be in shared
// memory; the tiles may still be arriving in the thread's last group of copies (cp_async_commit),
// which it waits for once the factors are computed. The tiles end as the products take them
// (product_operand). Ends with a __syncthreads.
template <class T, Products kProducts, int kThreads, int P>
__device__ void apply_decays(const T* raw_k, int key_mode, T* key_to_end, T* key_from_start, T* key_last,
                             const T* raw_v, int value_mode, T* value_to_end, T* value_from_start, T* value_last,
                             LogDecaySum<T>* scratch) {
  using S = ColumnShare<T, kThreads>;
  const S x = column_share<T, kThreads, P>(raw_k, key_mode, raw_v, value_mode, scratch);
  T* to_end = x.key_side ? key_to_end : value_to_end;
  T* from_start = x.key_side ? key_from_start : value_from_start;
  if (x.t0 == 0) (x.key_side ? key_last : value_last)[x.c] = x.chunk_decay();
  T end_factor[S::kRows], start_factor[S::kRows];
#pragma unroll
  for (int i = 0; i < S::kRows; ++i) {
    end_factor[i] = to_end != nullptr ? x.to_end(i) : T(1);
    start_factor[i] = from_start != nullptr ? x.from_start(i) : T(1);
  }
  cp_async_wait_all();  // the tiles (see the caller)
  __syncthreads();
  if (x.mode != kNoDecay || kProducts == Products::kTF32) {
#pragma unroll
    for (int i = 0; i < S::kRows; ++i) {
      const int e = (x.t0 + i) * P + x.c;
      if (to_end != nullptr) to_end[e] = product_operand<kProducts>(to_end[e] * end_factor[i]);
      if (from_start != nullptr) from_start[e] = product_operand<kProducts>(from_start[e] * start_factor[i]);
    }
  }
  __syncthreads();
}

// One block per (sub-problem, sequence, chunk): the chunk's update U (kForward) and W (kBackward)
// and its decays (see above), each warp 16 rows (value channels) of the 64 x 64 updates.
template <class T, Products kProducts, bool kForward, bool kBackward>
__global__ void __launch_bounds__(32 * kUpdateWarps, 2) chunk_updates_kernel(ScanArgs<T> a) {
  using G = Geometry<T>;
  constexpr int C = G::kChunk, P = G::kPitch, N = 32 * kUpdateWarps;
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  T* sk = reinterpret_cast<T*>(smem_bytes);  // k, scaled to the chunk's end (U)
  T* sv = sk + C * P;                        // v, likewise
  T* sq = sv + C * P;                        // q, scaled from the chunk's start (W)
  T* sdo = sq + C * P;                       // dout, likewise
  T* sgk = sdo + C * P;                      // raw decays, then scratch
  T* sgv = sgk + C * P;
  T* key_last = sgv + C * P;                 // exp(Lk_last), exp(Lv_last): kWidth each
  T* value_last = key_last + kWidth;
  auto* scratch = reinterpret_cast<LogDecaySum<T>*>(value_last + kWidth);  // N sums (apply_decays)

  const Place p = place_of(a, a.chunks);
  const int64_t p0 = p.index * C, kc = kWidth * p.kt, vc = kWidth * p.vt;
  // The decays first, in a group of their own: their sums and factors are computed while the tiles
  // arrive (apply_decays).
  load_decays<T, N, P>(sgk, a.gk, a.key_mode, p, p0, C, a.steps, kc, kWidth, a.dk);
  load_decays<T, N, P>(sgv, a.gv, a.value_mode, p, p0, C, a.steps, vc, kWidth, a.dv);
  cp_async_commit();
  // A bfloat16 scan's tiles land after the first wait (NarrowPiece), to be read after
  // apply_decays' barrier.
  NarrowPiece k_piece, v_piece, q_piece, do_piece;
  if (kForward) {
    k_piece = load_tile<T, N, P>(sk, a.k, p, p0, C, a.steps, kc, kWidth, a.dk);
    v_piece = load_tile<T, N, P>(sv, a.v, p, p0, C, a.steps, vc, kWidth, a.dv);
  }
  if (kBackward) {
    q_piece = load_tile<T, N, P>(sq, a.q, p, p0, C, a.steps, kc, kWidth, a.dk);
    do_piece = load_tile<T, N, P>(sdo, a.dout, p, p0, C, a.steps, vc, kWidth, a.dv);
  }
  cp_async_commit();
  cp_async_wait_all_but_last();
  __syncthreads();
  if constexpr (std::is_same_v<T, float>) {
    k_piece.land(sk), v_piece.land(sv), q_piece.land(sq), do_piece.land(sdo);
  }
  apply_decays<T, kProducts, N, P>(sgk, a.key_mode, kForward ? sk : nullptr, kBackward ? sq : nullptr, key_last, sgv,
                        a.value_mode, kForward ? sv : nullptr, kBackward ? sdo : nullptr, value_last, scratch);

  const int w = threadIdx.x / 32, row0 = kSub * (w / kSplit);
  const Columns cols{kWidth / kSplit * (w % kSplit), 8};
  T* decays = chunk_decays(a.decays, a, p, p.index);
  for (int c = threadIdx.x; c < kWidth; c += N) {
    decays[c] = value_last[c];
    decays[kWidth + c] = key_last[c];
  }
  auto update = [&](const T* values, const T* keys, T* out) {
    T acc[kChannelTiles][4];
    zero(acc);
    // The contraction runs down both tiles' rows: paired k-slots (chunked_scan.cuh: warp_product).
    warp_product<kProducts, true>(acc, C, cols, 0, kChannelTiles,
                                     [&](int r, int s) { return values[s * P + row0 + r]; },
                                     [&](int s, int i) { return keys[s * P + i]; });
    const FragmentLane l = fragment_lane();
    T* tile = update_tile(out, a, p, p.index);
#pragma unroll
    for (int n = 0; n < kChannelTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) tile[(row0 + fragment_row(l, e)) * kWidth + cols.of(l, n, e)] = acc[n][e];
  };
  if (kForward) update(sv, sk, a.updates);
  if (kBackward) update(sdo, sq, a.dupdates);
}

// The scans over chunks (see above). Blocks [0, half) run the forward one, storing the state
// before each chunk in slot n of `states` (slot chunks: the final state, also to final_state);
// blocks [half, 2 half) (backward only) the backward one from dfinal, storing the gradient after
// chunk n in slot n of `dstates` and dL/dS_0 in dinitial. Block b of the grid is block b + first
// of that numbering (first = half: the backward scan alone, the states being known). A block holds a quarter of one
// sub-problem's state tile, 4 elements per thread. Only h depends on the chunk before: the
// updates and decays of the next kScanAhead chunks are in flight while the current one is
// applied, so the loop waits on memory once per kScanAhead chunks. (With one chunk ahead it waited
// once per chunk: at T = 16k, 256 chunks, 215 us a scan on an H200, for 0.5 GB of traffic.)
constexpr int kScanAhead = 4;

template <class T>
__global__ void __launch_bounds__(kScanThreads) state_scan_kernel(ScanArgs<T> a, int64_t half, int64_t first) {
  constexpr int E = kWidth * kWidth / (kScanBlocks * kScanThreads);  // elements per thread
  const int64_t block = blockIdx.x + first;
  const bool backward = block >= half;
  const Place where = place_of(a, kScanBlocks, backward ? block - half : block);  // index: the quarter
  int elements[E];
  T h[E];
  const T* init = backward ? a.dfinal : a.s0;
  for (int u = 0; u < E; ++u) {
    elements[u] = static_cast<int>(where.index) * kScanThreads * E + u * kScanThreads + threadIdx.x;
    const int64_t j = kWidth * where.vt + elements[u] / kWidth, i = kWidth * where.kt + elements[u] % kWidth;
    h[u] = init != nullptr && j < a.dv && i < a.dk ? init[(where.seq * a.dv + j) * a.dk + i] : T(0);
  }
  T* out = backward ? a.dstates : a.states;
  const T* updates = backward ? a.dupdates : a.updates;
  const int64_t slots = backward ? a.chunks : a.chunks + 1;
  auto chunk_at = [&](int64_t step) { return backward ? a.chunks - 1 - step : step; };
  // Ring slot r holds the loads of steps r, r + kScanAhead, ...
  T ahead_update[kScanAhead][E], ahead_ev[kScanAhead][E], ahead_ek[kScanAhead][E];
  auto fetch = [&](int r, int64_t step) {
    const int64_t n = chunk_at(step);
    const T* u = update_tile(const_cast<T*>(updates), a, where, n);
    const T* d = chunk_decays(a.decays, a, where, n);
#pragma unroll
    for (int x = 0; x < E; ++x) {
      ahead_update[r][x] = __ldg(u + elements[x]);
      ahead_ev[r][x] = __ldg(d + elements[x] / kWidth);
      ahead_ek[r][x] = __ldg(d + kWidth + elements[x] % kWidth);
    }
  };
#pragma unroll
  for (int r = 0; r < kScanAhead; ++r)
    if (r < a.chunks) fetch(r, r);
  for (int64_t base = 0; base < a.chunks; base += kScanAhead) {
#pragma unroll
    for (int r = 0; r < kScanAhead; ++r) {
      const int64_t step = base + r;
      if (step >= a.chunks) break;
      T* tile = state_tile(out, where, slots, chunk_at(step));
      T update[E], ev[E], ek[E];
#pragma unroll
      for (int x = 0; x < E; ++x) update[x] = ahead_update[r][x], ev[x] = ahead_ev[r][x], ek[x] = ahead_ek[r][x];
      if (step + kScanAhead < a.chunks) fetch(r, step + kScanAhead);
#pragma unroll
      for (int x = 0; x < E; ++x) {
        tile[elements[x]] = h[x];
        h[x] = h[x] * ev[x] * ek[x] + update[x];
      }
    }
  }
  T* final_out = backward ? a.dinitial : a.final_state;
  if (!backward) {
    T* tile = state_tile(a.states, where, slots, a.chunks);
    for (int x = 0; x < E; ++x) tile[elements[x]] = h[x];
  }
  if (final_out == nullptr) return;
  for (int x = 0; x < E; ++x) {
    const int64_t j = kWidth * where.vt + elements[x] / kWidth, i = kWidth * where.kt + elements[x] % kWidth;
    if (j < a.dv && i < a.dk) final_out[(where.seq * a.dv + j) * a.dk + i] = h[x];
  }
}

// ---- the per-chunk kernels: shared tiles -------------------------------------------------------

// The per-chunk kernels' shared memory, carved in this order.
template <class T>
struct ChunkTiles {
  using G = Geometry<T>;
  static constexpr int kTile = G::kChunk * G::kPitch;    // positions x channels
  static constexpr int kLog = G::kChunk * G::kLogPitch;  // cumulative log decays (double)
  static constexpr int kState = kWidth * G::kPitch;      // a state tile
  static constexpr int kStripes = G::kStripes * kSub * G::kStripePitch;
  static constexpr int kStateTermParts = G::kThreads / (2 * kWidth);  // threads a channel (chunk_gradient_body)
  double *Lk, *Lv;             // the two sides' cumulative log decays
  T *q, *k, *v, *h;            // forward and backward (the backward's dout and dh follow)
  T *dout, *dh;                // backward only
  T *w, *z;                    // the raw decays while loading; then the decay gradients' scratch (backward)
  T *stripes, *diag;           // each warp's score stripe and its s = t terms
  T *key_last, *value_last;    // exp(Lk_last), exp(Lv_last) per channel (mild chunks)
  T *gk_state, *gv_state;      // backward: carried-state terms of the decay gradients, kStateTermParts parts

  __device__ ChunkTiles(unsigned char* bytes, bool backward) {
    Lk = reinterpret_cast<double*>(bytes);
    Lv = Lk + kLog;
    T* x = reinterpret_cast<T*>(Lv + kLog);
    auto take = [&x](int n) { T* p = x; x += n; return p; };
    q = take(kTile), k = take(kTile), v = take(kTile), h = take(kState);
    if (backward) dout = take(kTile), dh = take(kState);
    w = take(kTile), z = take(kTile);
    stripes = take(kStripes), diag = take(G::kStripes * kSub);
    key_last = take(kWidth), value_last = take(kWidth);
    if (backward) gk_state = take(kStateTermParts * kWidth), gv_state = take(kStateTermParts * kWidth);
  }
  static constexpr size_t bytes(bool backward) {
    return sizeof(double) * 2 * kLog + sizeof(T) * (5 * kTile + kState + kStripes + G::kStripes * kSub + 2 * kWidth +
                                                    (backward ? kTile + kState + 2 * kStateTermParts * kWidth : 0));
  }
};

// How a per-chunk kernel rescales its results' elements on one side. A mild chunk's products ran on
// factored operands (prepare_chunk) and its results take the factors exp(L_t), exp(-L_t) per
// position and channel, which prepare_chunk left in place of the log decays; any other chunk's
// products carried the decays, and only the terms through the state take exp of the log decays.
// The tiles of exp(L_t) and exp(-L_t) take the bytes of a side's log decays: in float32 both fit;
// float64 keeps exp(L_t) alone and divides by it (correctly rounded) for exp(-L_t).
template <class T>
struct ScaleFactors {
  static constexpr bool kKeepsInverse = 2 * sizeof(T) <= sizeof(double);
  static constexpr int kPitch = Geometry<T>::kLogPitch;  // elements per row, as the log decays' doubles
  T *up, *down;  // (kChunk, kPitch): exp(L_t), exp(-L_t) (down null without kKeepsInverse)
  __device__ __forceinline__ int at(int t, int c) const { return t * kPitch + c; }
  __device__ __forceinline__ T inverse(int e) const { return kKeepsInverse ? down[e] : T(1) / up[e]; }
};
template <class T>
__device__ __forceinline__ ScaleFactors<T> mild_factors(double* log) {
  T* base = reinterpret_cast<T*>(log);
  return {base, ScaleFactors<T>::kKeepsInverse ? base + Geometry<T>::kChunk * ScaleFactors<T>::kPitch : nullptr};
}
template <class T>
struct Scaling {
  bool mild;
  Side<T> side;              // the log decays (not mild)
  ScaleFactors<T> factors;   // mild
  const T* last;             // exp(L_last) per channel
  // exp(L_t) at position t, channel c.
  __device__ __forceinline__ T from_start(int t, int c) const {
    if (mild) return factors.up[factors.at(t, c)];
    return side.mode == kNoDecay ? T(1) : exp_to<T>(side.at(t, c));
  }
  // exp(-L_t): mild chunks only.
  __device__ __forceinline__ T inverse(int t, int c) const { return factors.inverse(factors.at(t, c)); }
  // exp(L_last - L_t), the decay from t to the chunk's end.
  __device__ __forceinline__ T to_end(int t, int c) const {
    if (mild) return last[c] * factors.inverse(factors.at(t, c));
    return side.mode == kNoDecay ? T(1) : exp_to<T>(side.at(Geometry<T>::kChunk - 1, c) - side.at(t, c));
  }
};

// The state tiles prepare_chunk loaded (h, and dh' in the backward, unless the chain hands them
// over: pass_state), rounded in place as the products take them. Their copies must have landed.
template <Products kProducts, bool kChained, class T>
__device__ __forceinline__ void round_state_tiles(const ChunkTiles<T>& s, bool backward) {
  if constexpr (kProducts == Products::kTF32) {
    constexpr int P = Geometry<T>::kPitch;
    auto round_tile = [](T* tile) {
      for (int e = threadIdx.x; e < kWidth * kWidth; e += Geometry<T>::kThreads) {
        T& x = tile[e / kWidth * P + e % kWidth];
        x = product_operand<kProducts>(x);
      }
    };
    if (backward || !kChained) round_tile(s.h);
    if (backward && !kChained) round_tile(s.dh);
  }
}

// prepare_chunk's work once the decays have landed: their sums, the chunk's way (returned: mild or
// not) and the tiles written as the products take them, the block's threads in ColumnShare<T, N,
// kSides>. Ends with a __syncthreads.
template <Products kProducts, bool kChained, int kSides, class T>
__device__ bool factor_chunk(const ChunkTiles<T>& s, const ScanArgs<T>& a, bool backward) {
  using G = Geometry<T>;
  constexpr int P = G::kPitch, LP = G::kLogPitch, N = G::kThreads;
  // The sums' scratch: the score stripes, unused until the products.
  auto* sums_scratch = reinterpret_cast<LogDecaySum<T>*>(s.stripes);
  const ColumnShare<T, N, kSides> x = column_share<T, N, P, kSides>(s.w, a.key_mode, s.z, a.value_mode, sums_scratch);
  const T chunk_decay = x.chunk_decay();
  if (x.t0 == 0) (x.key_side ? s.key_last : s.value_last)[x.c] = chunk_decay;
  // With one side the thread also has the same channel and positions of the other side, which does
  // not decay: factors of 1 and its tiles rounded.
  if (kSides == 1 && x.t0 == 0) (x.key_side ? s.value_last : s.key_last)[x.c] = T(1);
  const bool mild = __syncthreads_and(x.total.as_double() >= -kMildLogDecay);
  // The update's operands that need a tile of their own (prepare_chunk's comment): the thread's
  // channel over its positions, times update_factor (each way below fills it: exp(L_t) backward,
  // exp(L_last - L_s) forward).
  constexpr int R = ColumnShare<T, N, kSides>::kRows;
  const bool own_tile = kChained && x.mode != kNoDecay && (!backward || !mild);
  T* update_operand = x.key_side ? s.w : s.z;
  const T* update_source = x.key_side ? (backward ? s.q : s.k) : (backward ? s.dout : s.v);
  T update_factor[R];
  constexpr bool kRound = kProducts == Products::kTF32;
  // The thread's elements of its side's tiles (two forward and backward, q and k or v and dout;
  // v alone forward).
  T* first = x.key_side ? s.q : s.v;
  T* second = x.key_side ? s.k : (backward ? s.dout : nullptr);
  // With one side, the other side's tiles at the same elements: only rounded.
  T* still_first = x.key_side ? s.v : s.q;
  T* still_second = x.key_side ? (backward ? s.dout : nullptr) : s.k;
  // Writes the thread's elements of the update's own tile (from its source before that is
  // factored) and, when they are scaled or rounded, of its side's tiles (times first_factor(i) and
  // second_factor(i) when `scaled`), as the products take them. Once the tiles have landed.
  auto write_operands = [&](const auto& first_factor, const auto& second_factor, bool scaled) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int e = (x.t0 + i) * P + x.c;
      if (own_tile) update_operand[e] = product_operand<kProducts>(update_source[e] * update_factor[i]);
      if (scaled || kRound) {
        first[e] = product_operand<kProducts>(scaled ? first[e] * first_factor(i) : first[e]);
        if (second != nullptr)
          second[e] = product_operand<kProducts>(scaled ? second[e] * second_factor(i) : second[e]);
      }
      if (kSides == 1 && kRound) {
        still_first[e] = product_operand<kProducts>(still_first[e]);
        if (still_second != nullptr) still_second[e] = product_operand<kProducts>(still_second[e]);
      }
    }
  };
  if (!mild) {
    double* L = x.key_side ? s.Lk : s.Lv;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      update_factor[i] = !own_tile ? T(1) : backward ? x.from_start(i) : x.to_end(i);
      if (x.mode == kChannelDecay) L[(x.t0 + i) * LP + x.c] = x.L[i].as_double();
      else if (x.mode == kScalarDecay && x.c == 0) L[x.t0 + i] = x.L[i].as_double();
    }
    cp_async_wait_all();
    __syncthreads();
    if (kChained || kRound) {
      const auto unused = [](int) { return T(1); };
      write_operands(unused, unused, false);
      round_state_tiles<kProducts, kChained>(s, backward);
      __syncthreads();
    }
    return false;
  }
  // The factors exp(L_t) and exp(-L_t) of both sides, and the factored operands q+ = q exp(Lk_t),
  // k- = k exp(-Lk_s), v- = v exp(-Lv_s), do+ = do exp(Lv_t). The factors take the place of the
  // log decays (ScaleFactors), which a mild chunk never stores; the operands wait for their tiles.
  // The forward's update factor exp(L_last - L_s) is exp(L_last) exp(-L_s), from factors at hand
  // (one rounding more, and one exponential fewer an element; a mild chunk's backward has none).
  const ScaleFactors<T> factors = mild_factors<T>(x.key_side ? s.Lk : s.Lv);
  T up[R], down[R];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    up[i] = down[i] = T(1);
    if (x.mode != kNoDecay) x.L[i].exp_both(up[i], down[i]);
    update_factor[i] = own_tile ? chunk_decay * down[i] : T(1);
    // The forward reads no key-side factor (chunk_output_body: q+ and k- carry them), only the
    // value side's exp(Lv_t), so its key side stores none. (The ones below for a value-side gate's
    // key side are unread in the forward too; they stay, as that case was not run on a GPU.)
    if (backward || !x.key_side) {
      factors.up[factors.at(x.t0 + i, x.c)] = up[i];
      if constexpr (ScaleFactors<T>::kKeepsInverse) factors.down[factors.at(x.t0 + i, x.c)] = down[i];
    }
    if constexpr (kSides == 1) {
      const ScaleFactors<T> still = mild_factors<T>(x.key_side ? s.Lv : s.Lk);
      still.up[still.at(x.t0 + i, x.c)] = T(1);
      if constexpr (ScaleFactors<T>::kKeepsInverse) still.down[still.at(x.t0 + i, x.c)] = T(1);
    }
  }
  cp_async_wait_all();
  __syncthreads();
  if (x.mode != kNoDecay || kRound) {  // q+ = q up, k- = k down; v- = v down, do+ = do up
    write_operands([&](int i) { return x.key_side ? up[i] : down[i]; },
                   [&](int i) { return x.key_side ? down[i] : up[i]; }, true);
  }
  round_state_tiles<kProducts, kChained>(s, backward);
  __syncthreads();
  return true;
}

// Loads what the per-chunk kernels read (q, k and the key side's decays over the key tile; v, and
// in the backward dout, and the value side's decays over the value tile; the state before the
// chunk and in the backward dh', except what pass_state hands over), sums the decays, and decides
// the chunk's way (the file's header): returns whether it is mild, after rescaling the operands for
// that way. Fills key_last and value_last (exp(L_last) per channel) either way. When the state
// passes between the blocks, it also leaves the operands of the chunk's own update of the state
// (chunk_update) in place: the forward's U multiplies k and v decayed to the chunk's end, which go
// to the w and z tiles (the raw decays' place, free once they are summed); the backward's W
// multiplies q and dout decayed from the chunk's start, which a mild chunk's factored q+ and do+
// are, and which go to w and z in any other chunk. A side without decay leaves its tile as it is,
// but for the rounding: every tile the products read ends as they take it (product_operand).
// Ends with a __syncthreads.
template <Products kProducts, bool kChained, class T>
__device__ bool prepare_chunk(const ChunkTiles<T>& s, const ScanArgs<T>& a, const Place& p, bool backward) {
  using G = Geometry<T>;
  constexpr int C = G::kChunk, P = G::kPitch, N = G::kThreads;
  const int64_t p0 = p.index * C, kc = kWidth * p.kt, vc = kWidth * p.vt;
  // The decays first, in a group of their own: their sums, the chunk's way and its factors are
  // computed while the tiles arrive.
  load_decays<T, N, P>(s.w, a.gk, a.key_mode, p, p0, C, a.steps, kc, kWidth, a.dk);
  load_decays<T, N, P>(s.z, a.gv, a.value_mode, p, p0, C, a.steps, vc, kWidth, a.dv);
  cp_async_commit();
  // A bfloat16 scan's tiles land after the first wait (NarrowPiece), to be read after the barriers
  // below.
  const NarrowPiece q_piece = load_tile<T, N, P>(s.q, a.q, p, p0, C, a.steps, kc, kWidth, a.dk);
  const NarrowPiece k_piece = load_tile<T, N, P>(s.k, a.k, p, p0, C, a.steps, kc, kWidth, a.dk);
  const NarrowPiece v_piece = load_tile<T, N, P>(s.v, a.v, p, p0, C, a.steps, vc, kWidth, a.dv);
  if (backward || !kChained) load_state_tile<T, N, P>(s.h, state_tile(a.states, p, a.state_slots, p.index));
  NarrowPiece do_piece;
  if (backward) {
    do_piece = load_tile<T, N, P>(s.dout, a.dout, p, p0, C, a.steps, vc, kWidth, a.dv);
    if (!kChained) load_state_tile<T, N, P>(s.dh, state_tile(a.dstates, p, a.dstate_slots, p.index));
  }
  cp_async_commit();
  cp_async_wait_all_but_last();
  __syncthreads();
  if constexpr (std::is_same_v<T, float>) {
    q_piece.land(s.q), k_piece.land(s.k), v_piece.land(s.v);
    if (backward) do_piece.land(s.dout);
  }
  // When one side decays (the GLA gate, a value-side gate) the whole block takes it (ColumnShare).
  return one_side_decays(a) ? factor_chunk<kProducts, kChained, 1>(s, a, backward)
                            : factor_chunk<kProducts, kChained, 2>(s, a, backward);
}

// Calls f(n, e, position, channel) for every element of the warp's accumulator of a 64-channel
// result (position = 16 a + row, the chunk position).
template <class F>
__device__ __forceinline__ void for_each_element(const WarpPart& w, const F& f) {
  const FragmentLane l = fragment_lane();
  const Columns cols = channel_columns(w);
#pragma unroll
  for (int n = 0; n < kChannelTiles; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) f(n, e, w.r0() + fragment_row(l, e), cols.of(l, n, e));
}

// Writes the warp's part of a 64-channel result to an output (partial sum `part`), skipping
// positions past the sequence and channels past `width`. A lane holds two neighbouring channels
// of each of its tiles in two rows (the accumulator layout): a row's offset is computed once, and
// the neighbours go in one store where the rows allow it. (Element by element, with the offset's
// 64-bit products at each, these stores were the largest straight run of code in chunk_gradient
// after the products' loops.)
template <class T>
__device__ void store_rows(const T (&x)[kChannelTiles][4], const Operand<T>& out, const Place& p, int64_t part,
                           const WarpPart& w, int64_t steps, int64_t c0, int64_t width) {
  if (!out.present()) return;
  const FragmentLane l = fragment_lane();
  const Columns cols = channel_columns(w);
  const int64_t p0 = p.index * Geometry<T>::kChunk;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t position = p0 + w.r0() + l.g + 8 * half;
    if (position >= steps) continue;
    const int64_t row = out.offset(p.b, p.h, position, part) + c0;
#pragma unroll
    for (int n = 0; n < kChannelTiles; ++n) {
      const int c = cols.of(l, n, 0);  // even
      const T x0 = x[n][2 * half], x1 = x[n][2 * half + 1];
      if (out.vectors && c0 + c + 1 < width) {
        out.store_pair(row + c, x0, x1);
      } else {
        if (c0 + c < width) out.store(row + c, x0);
        if (c0 + c + 1 < width) out.store(row + c + 1, x1);
      }
    }
  }
}

// The inter-chunk terms: products of rows of X, decayed, with a state tile M (rows: value channels
// j, columns: key channels i, in shared memory):
//   through_state<false>  out[r][j] = sum_i X[t][i] f(t, i) M[j][i]     (o: X = q, M = h)
//   through_state<true>   out[r][i] = sum_j X[t][j] f(t, j) M[j][i]     (dq: X = dout, M = h)
// with f = exp(L_t) of the contracted side, or with `to_end` the decay from t to the chunk's end,
// exp(L_last - L_t) (dv: X = k, M = dh'; dk: X = v, M = dh'); f = 1 without decay. A mild chunk's
// operands carry exp(-L_t) already: there f is the channel's exp(L_last) (`channel_factor`).
// Transposed, the contraction runs down M's rows: paired k-slots (warp_product).
template <Products kProducts, bool kTransposed, class T>
__device__ void through_state(T (&out)[kChannelTiles][4], const T* X, const Side<T>& side, const T* M,
                              const WarpPart& w, bool to_end, const T* channel_factor = nullptr) {
  constexpr int P = Geometry<T>::kPitch, last = Geometry<T>::kChunk - 1;
  const int r0 = w.r0();
  const bool decays = side.mode != kNoDecay;
  warp_product<kProducts, kTransposed>(
      out, kWidth, channel_columns(w), 0, kChannelTiles,
      [&](int r, int c) {
        const int t = r0 + r;
        const T x = X[t * P + c];
        if (channel_factor != nullptr) return product_operand<kProducts>(x * channel_factor[c]);
        if (!decays) return x;
        return product_operand<kProducts>(x * exp_to<T>(to_end ? side.at(last, c) - side.at(t, c) : side.at(t, c)));
      },
      [&](int c, int n) { return kTransposed ? M[c * P + n] : M[n * P + c]; });
}

// A side's causal product (o, or dq), the part of a pass that runs forward in time, before its
// s = t terms and a mild chunk's rescaling (the caller's): first the causal scores of X and Y,
// decayed on `scores_side`, into the warp's stripe (score_stripe; all stripes, in s.stripes, and
// their s = t terms in diag stay for the caller and for input_gradient), then
//   intra = the scores times Z, decayed on z_side (decayed_product),
//   state = X through the state h (through_state<kTransposed>), decayed from the chunk's start.
// o: X = q, Y = k (the key side), Z = v; dq: X = dout, Y = v (the value side), Z = k, transposed.
template <Products kProducts, bool kTransposed, class T>
__device__ __forceinline__ void causal_parts(T (&intra)[kChannelTiles][4], T (&state)[kChannelTiles][4],
                                             const ChunkTiles<T>& s, T* stripe, T* diag, const T* X, const T* Y,
                                             const Side<T>& scores_side, const T* Z, const Side<T>& z_side,
                                             const WarpPart& w) {
  score_stripe<kProducts>(stripe, diag, X, Y, scores_side, w);
  zero(intra);
  decayed_product<kProducts, true>(intra, s.stripes, Z, z_side, w);
  zero(state);
  through_state<kProducts, kTransposed>(state, X, scores_side, s.h, w, false);
}

// ---- the state passed between the per-chunk kernels' blocks ------------------------------------
//
// ScanStatePass::kChain: U_n and W_n (above) need only chunk n's inputs, which its per-chunk block
// loads anyway, so the block computes its chunk's update as one more product (chunk_update) and
// takes part in a chain (chunk_chain.cuh): it waits for the state before its chunk (backward: the
// gradient after it), computes the next elementwise, stores it for the next chunk's block, says so,
// and goes on with its chunk. The sequential path is that elementwise step and its trip through
// L2 per chunk; the state pass then has no kernels, loads or decay sums of its own, and no update
// makes a round trip through memory. Unlike a kernel walking the chunks (above), the chunk's decay
// factors and its products stay off the sequential path.
//
// Where the states go: from block to block through one slot of tagged words per chain
// (chunk_chain.cuh), and, when the backward is to read them, into the kept states as well (the
// state before every chunk n in slot n, the final one in slot chunks: state_slots = chunks + 1).
// The gradients go through the ring alone.

// This warp's part of the chunk's own update of the state, sum over positions s of rows[s][j]
// cols[s][i] (rows j: value channels, columns i: key channels; kStateRows groups of 16 rows, the
// accumulator layout). The contraction runs down both tiles' rows: paired k-slots.
template <Products kProducts, class T>
__device__ void chunk_update(T (&acc)[Geometry<T>::kStateRows][kChannelTiles][4], const T* rows, const T* cols,
                             const WarpPart& w) {
  using G = Geometry<T>;
  constexpr int P = G::kPitch;
#pragma unroll
  for (int g = 0; g < G::kStateRows; ++g) {
    const int row0 = kSub * (w.a + G::kStripes * g);
    zero(acc[g]);
    warp_product<kProducts, true>(acc[g], G::kChunk, channel_columns(w), 0, kChannelTiles,
                                  [&](int r, int s) { return rows[s * P + row0 + r]; },
                                  [&](int s, int i) { return cols[s * P + i]; });
  }
}

// Element (j, i) of the chain's tile of a whole (B, H, dv, dk) contiguous state x, or null where x
// is null or the tile reaches past dv or dk.
template <class T, class X>
__device__ __forceinline__ X* whole_state_at(X* x, const ScanArgs<T>& a, const Place& p, int j, int i) {
  const int64_t row = static_cast<int64_t>(kWidth) * p.vt + j, col = static_cast<int64_t>(kWidth) * p.kt + i;
  return x != nullptr && row < a.dv && col < a.dk ? x + (p.seq * a.dv + row) * a.dk + col : nullptr;
}

// A state tile's elements as a thread holds them in the accumulator layout of chunk_update: one
// 16-byte pair of neighbours (float2, double2) at a time.
template <class T>
using StatePair = std::conditional_t<std::is_same_v<T, float>, float2, double2>;
template <class T>
using StateUpdate = T[Geometry<T>::kStateRows][kChannelTiles][4];

// f(g, n, half, j, i) for each of the thread's pairs of a state tile: rows j of its groups g
// (fragment rows l.g and l.g + 8 by `half`), columns i and i + 1 of its tiles n; the pair's
// elements in the accumulator are [g][n][2 half] and [g][n][2 half + 1].
template <class T, class F>
__device__ __forceinline__ void for_each_state_pair(const F& f) {
  using G = Geometry<T>;
  const WarpPart w = warp_part();
  const FragmentLane l = fragment_lane();
  const Columns cols = channel_columns(w);
#pragma unroll
  for (int g = 0; g < G::kStateRows; ++g)
#pragma unroll
    for (int n = 0; n < kChannelTiles; ++n)
#pragma unroll
      for (int half = 0; half < 2; ++half)
        f(g, n, half, kSub * (w.a + G::kStripes * g) + l.g + 8 * half, cols.of(l, n, 0));
}

// The pair (j, i), (j, i + 1) of what enters the chain (s0 forward, dfinal backward; zeros without).
template <bool kBackward, class T>
__device__ __forceinline__ StatePair<T> chain_start_pair(const ScanArgs<T>& a, const Place& p, int j, int i) {
  const T* first = whole_state_at(kBackward ? a.dfinal : a.s0, a, p, j, i);
  const T* second = whole_state_at(kBackward ? a.dfinal : a.s0, a, p, j, i + 1);
  return {first != nullptr ? *first : T(0), second != nullptr ? *second : T(0)};
}

// One link's step of the chain: what leaves a chunk from what came into it, x * ev * ek + u.
template <class T>
__device__ __forceinline__ StatePair<T> chain_step(const StatePair<T>& x, T ev, T ek0, T ek1, T u0, T u1) {
  return {x.x * ev * ek0 + u0, x.y * ev * ek1 + u1};
}

// What leaves the chain's last chunk goes to final_state (forward) or dinitial (backward).
template <bool kBackward, class T>
__device__ __forceinline__ void store_chain_end(const ScanArgs<T>& a, const Place& p, int j, int i,
                                                const StatePair<T>& x) {
  T* end = kBackward ? a.dinitial : a.final_state;
  if (T* last = whole_state_at(end, a, p, j, i)) *last = x.x;
  if (T* last = whole_state_at(end, a, p, j, i + 1)) *last = x.y;
}

// The words of a chain's slot: kWidth x kWidth elements, sizeof(T) / 4 tagged words each.
template <class T>
constexpr int64_t kChainSlotWords = static_cast<int64_t>(kWidth) * kWidth * (sizeof(T) / 4);
template <class T>
__device__ __forceinline__ TaggedWord* chain_slot_at(const ScanArgs<T>& a, const Place& p, int j, int i) {
  return a.chain.slots + p.chain * kChainSlotWords<T> + (j * kWidth + i) * (sizeof(T) / 4);
}

// The block's link of the chain, forward (the states) or backward (their gradients), with `update`
// the warp's part of U_n or W_n (chunk_update): waits for what comes into the chunk (the state
// before it, or the gradient after it: s0 or dfinal at the chain's start, zeros without them),
// leaves that in `tile` (rows of kPitch, as the products take it: product_operand; null: not
// wanted) and, forward, in the kept states when there are any (a.states: slot n, and the final
// state in slot chunks), and stores what goes out of it, x * ev * ek + update, tagged for the next
// block (or into final_state or dinitial at the chain's end). Every thread of the block calls it;
// each thread waits only for its own elements (chunk_chain.cuh: tagged words), and the block meets
// at one barrier at the end when it fills `tile`.
template <bool kBackward, Products kProducts, class T>
__device__ void pass_state(const StateUpdate<T>& update, T* tile, const ChunkTiles<T>& s, const ScanArgs<T>& a,
                           const Place& p) {
  using G = Geometry<T>;
  using Pair = StatePair<T>;
  constexpr int P = G::kPitch, R = G::kStateRows, kPairs = R * kChannelTiles * 2;
  const int64_t position = links_before(p.index, a.chunks, kBackward);  // chain_order.h
  T* kept = !kBackward && a.states != nullptr ? state_tile(a.states, p, a.state_slots, p.index) : nullptr;
  Pair x[R][kChannelTiles][2];
  if (position > 0) {
    TaggedPair<T> in[kPairs];
    TaggedWord* at[kPairs];
    for_each_state_pair<T>([&](int g, int n, int half, int j, int i) {
      at[(g * kChannelTiles + n) * 2 + half] = chain_slot_at(a, p, j, i);
    });
    take_tagged(in, [&](int k) { return at[k]; }, link_tag(position));
    for_each_state_pair<T>([&](int g, int n, int half, int j, int i) {
      in[(g * kChannelTiles + n) * 2 + half].values(x[g][n][half].x, x[g][n][half].y);
    });
  } else {  // the chain's start
    for_each_state_pair<T>(
        [&](int g, int n, int half, int j, int i) { x[g][n][half] = chain_start_pair<kBackward>(a, p, j, i); });
  }
  for_each_state_pair<T>([&](int g, int n, int half, int j, int i) {
    const Pair& v = x[g][n][half];
    if (tile != nullptr) {
      tile[j * P + i] = product_operand<kProducts>(v.x);
      tile[j * P + i + 1] = product_operand<kProducts>(v.y);
    }
    if (kept != nullptr) reinterpret_cast<Pair*>(kept + j * kWidth + i)[0] = v;
    const Pair next = chain_step(v, s.value_last[j], s.key_last[i], s.key_last[i + 1], update[g][n][2 * half],
                                 update[g][n][2 * half + 1]);
    if (position + 1 < a.chunks) {
      TaggedPair<T>::store(chain_slot_at(a, p, j, i), next.x, next.y, link_tag(position + 1));
    } else {
      store_chain_end<kBackward>(a, p, j, i, next);
      if (kept != nullptr) reinterpret_cast<Pair*>(kept + kWidth * kWidth + j * kWidth + i)[0] = next;
    }
  });
  if (tile != nullptr) __syncthreads();
}

// A persistent block's next ticket (for_block_chunk): asked for once while it works on a chunk,
// where the body says (ask), and read when the chunk is done (thread 0's). Asked for too early, it
// would tie the next chunk to this block while other blocks finish first; too late, its trip
// through L2 shows. One-block-a-chunk launches have none (a null counter).
struct TicketAhead {
  unsigned* counter = nullptr;
  unsigned value = 0;
  bool asked = false;
  __device__ __forceinline__ void ask() {
    if (counter != nullptr && threadIdx.x == 0 && !asked) value = atomicAdd(counter, 1u), asked = true;
  }
};

// ---- chunk_output ----------------------------------------------------------------------------

// The chunk's outputs once prepare_chunk has run, for a mild chunk (kMild) or any other. The way is
// a template argument so that each instantiation holds only its own code: with the decays
// factored out, the products' sides are kNoDecay at compile time and the mild body has none of
// the decayed branches (a kernel holding both ways ran out of the instruction cache: ncu's
// "no instruction" was its largest stall).
template <class T, Products kProducts, bool kMild, bool kChained>
__device__ __forceinline__ void chunk_output_body(const ChunkTiles<T>& s, const ScanArgs<T>& a, const Place& p,
                                                  TicketAhead& next) {
  using G = Geometry<T>;
  constexpr int P = G::kPitch;
  const WarpPart w = warp_part();
  const int r0 = w.r0();
  // When the state passes between the blocks: the chunk's own update of it, U, from k and v
  // decayed to the chunk's end (prepare_chunk).
  T update[G::kStateRows][kChannelTiles][4];
  if constexpr (kChained) {
    chunk_update<kProducts>(update, a.value_mode == kNoDecay ? s.v : s.z, a.key_mode == kNoDecay ? s.k : s.w, w);
    if (!a.out.present()) {  // the states alone, for a backward that computes them again
      pass_state<false, kProducts>(update, static_cast<T*>(nullptr), s, a, p);
      return;
    }
  }
  T* stripe = s.stripes + w.a * kSub * G::kStripePitch;
  T* diag = s.diag + w.a * kSub;
  const Scaling<T> value{kMild, {s.Lv, a.value_mode}, mild_factors<T>(s.Lv), s.value_last};
  // The sides the products see: none once the decays are factored out of the operands.
  const Side<T> key_p{s.Lk, kMild ? kNoDecay : a.key_mode}, value_p{s.Lv, kMild ? kNoDecay : a.value_mode};
  T o[kChannelTiles][4], inter[kChannelTiles][4];
  // The parts within the chunk first, which need no state: A = q k^T, then A v.
  score_stripe<kProducts>(stripe, diag, s.q, s.k, key_p, w);
  zero(o);
  decayed_product<kProducts, true>(o, s.stripes, s.v, value_p, w);
  // Then the part through the state h_n (from the chain, which takes h_{n+1} on to the next chunk).
  if constexpr (kChained) pass_state<false, kProducts>(update, s.h, s, a, p);
  zero(inter);
  through_state<kProducts, false>(inter, s.q, key_p, s.h, w, false);
  for_each_element(w, [&](int n, int e, int t, int j) {
    const T sum = o[n][e] + diag[t - r0] * s.v[t * P + j];
    o[n][e] = kMild ? (sum + inter[n][e]) * value.from_start(t, j) : sum + inter[n][e] * value.from_start(t, j);
  });
  store_rows(o, a.out, p, p.kt, w, a.steps, kWidth * p.vt, a.dv);
}

// Both per-chunk kernels around their bodies: the block's chunk, its tiles loaded (prepare_chunk),
// then body(tiles, place, way, next) with the chunk's way as a type (std::true_type for a mild
// chunk) and the block's next ticket (TicketAhead, when it has one). A block takes one chunk,
// from its blockIdx or, when the state passes between the blocks, from its ticket; or, with
// kPersistent, the launch has as many blocks as the GPU holds at once (persistent_grid), each taking
// chunk after chunk by ticket until the tickets run out. A persistent block asks for its next
// ticket while it works on a chunk (the forward as it starts one, the backward once dq is
// stored), so that the counter's trip through L2 overlaps the chunk's work: a block taking its
// ticket as it started spent about 1,500 of a forward chunk's 20,000 cycles on it
// (docs/benchmarks.md). Holding that ticket while it works on the one before keeps the chain's
// order safe (chunk_chain.cuh): the held ticket is larger than the one worked on, so the smallest
// ticket worked on never waits for a held one (tests/cuda/chain_order_test.cpp runs it so).
template <Products kProducts, bool kChained, bool kPersistent, class T, class Body>
__device__ __forceinline__ void for_block_chunk(const ScanArgs<T>& a, bool backward, const Body& body) {
  static_assert(kChained || !kPersistent, "persistent blocks take their chunks by ticket");
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  const ChunkTiles<T> s(smem_bytes, backward);
  auto run = [&](const Place& p, TicketAhead& next) {
    if (prepare_chunk<kProducts, kChained>(s, a, p, backward)) body(s, p, std::true_type{}, next);
    else body(s, p, std::false_type{}, next);
  };
  TicketAhead none;
  if constexpr (!kChained) {
    run(place_of(a, a.chunks), none);
  } else if constexpr (!kPersistent) {
    run(place_of_ticket(a, take_ticket(a.chain.tickets), backward), none);
  } else {
    __shared__ unsigned next_ticket;
    const unsigned tickets = static_cast<unsigned>(chunk_count(a));
    for (unsigned ticket = take_ticket(a.chain.tickets); ticket < tickets;) {
      TicketAhead next{a.chain.tickets};
      if (!backward) next.ask();
      run(place_of_ticket(a, ticket, backward), next);
      next.ask();  // where the body did not
      if (threadIdx.x == 0) next_ticket = next.value;
      // Also every thread's last reads of the tiles before the next chunk's copies land on them.
      __syncthreads();
      ticket = next_ticket;
    }
  }
}

// One block per (sub-problem, sequence, chunk), or persistent blocks taking chunk after chunk: o for
// the chunk's positions over the value tile, from the key tile (a partial sum when there are
// several key tiles). Warp a: rows 16 a ... 16 a + 15.
template <class T, Products kProducts, bool kChained, bool kPersistent>
__global__ void __launch_bounds__(Geometry<T>::kThreads, 1) chunk_output_kernel(ScanArgs<T> a) {
  for_block_chunk<kProducts, kChained, kPersistent>(
      a, false, [&](const ChunkTiles<T>& s, const Place& p, auto mild, TicketAhead& next) {
        chunk_output_body<T, kProducts, decltype(mild)::value, kChained>(s, a, p, next);
      });
}

// ---- chunk_gradient ----------------------------------------------------------------------------

// A side's per-position terms of its decay gradient (the file's header), held by the warps in the
// accumulator layout of their 16 positions x 64 / kSplit channels (for_each_element):
//   dg_t = sum_{u >= t} w_u + sum_{s < t} z_s + the carried state's term.
template <class T>
struct DecayTerms {
  T w[kChannelTiles][4], z[kChannelTiles][4];
};

// A warp's scans down its stripe's 16 rows, per column, of values in the accumulator layout: lane
// 4 g + t holds rows g (elements 0, 1) and g + 8 (elements 2, 3). The shuffles move along g.
// Inclusive sums from the end (x_t + x_{t+1} + ... + x_15): the stripe's total is at g = 0.
template <class T>
__device__ __forceinline__ void stripe_suffix_sums(T (&x)[kChannelTiles][4], int g, int t) {
#pragma unroll
  for (int n = 0; n < kChannelTiles; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
#pragma unroll
      for (int off = 1; off < 8; off *= 2) {
        const T later = __shfl_down_sync(0xffffffffu, x[n][e], 4 * off);
        if (g + off < 8) x[n][e] += later;
      }
#pragma unroll
  for (int n = 0; n < kChannelTiles; ++n)
#pragma unroll
    for (int b = 0; b < 2; ++b) x[n][b] += __shfl_sync(0xffffffffu, x[n][2 + b], t);  // + rows 8..15
}
// Exclusive sums from the start (x_0 + ... + x_{t-1}), and the stripe's totals of the lane's
// columns (total[n][b]: element b's column of tile n; every lane gets them).
template <class T>
__device__ __forceinline__ void stripe_prefix_sums(T (&x)[kChannelTiles][4], T (&total)[kChannelTiles][2], int g,
                                                   int t) {
#pragma unroll
  for (int n = 0; n < kChannelTiles; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {  // rows 0..7 (e < 2) before rows 8..15
#pragma unroll
      for (int off = 1; off < 8; off *= 2) {
        const T earlier = __shfl_up_sync(0xffffffffu, x[n][e], 4 * off);
        if (g >= off) x[n][e] += earlier;
      }
      const T before = __shfl_up_sync(0xffffffffu, x[n][e], 4);  // inclusive -> exclusive
      const T half_total = __shfl_sync(0xffffffffu, x[n][e], 28 + t);
      x[n][e] = g > 0 ? before : T(0);
      const int b = e & 1;
      if (e < 2) {
        total[n][b] = half_total;
      } else {
        x[n][e] += total[n][b];
        total[n][b] += half_total;
      }
    }
}

// Writes a side's decay gradient over the chunk from the warps' terms (DecayTerms; consumed): each
// warp scans its stripe (a suffix sum of w and an exclusive prefix sum of z, per column), then adds
// the totals of the stripes after it (w) and before it (z), exchanged through `scratch`
// (2 kStripes kWidth values, kSplit kChunk more for one decay per step), and the carried state's
// term (its partial sums, times the side's own exp(L_last)), in a fixed order (deterministic). With
// one decay per step the channels' sums are added up per position. The block's barrier here also
// orders everything the warps read before it (the score stripes) before what they write after it.
template <class T>
__device__ void write_decay_gradient(DecayTerms<T>& terms, const T* state_parts, const T* own_last, int mode,
                                     const Operand<T>& out, const Place& p, const WarpPart& w, int64_t part,
                                     int64_t steps, int64_t c0, int64_t width, T* scratch) {
  using G = Geometry<T>;
  constexpr int C = G::kChunk;
  const bool wanted = mode != kNoDecay && out.present();  // the same for the whole block
  const FragmentLane l = fragment_lane();
  const Columns cols = channel_columns(w);
  T* later_totals = scratch;                           // (kStripes, kWidth): each stripe's sum of w
  T* earlier_totals = scratch + G::kStripes * kWidth;  // and of z
  T z_total[kChannelTiles][2];
  if (wanted) {
    stripe_suffix_sums(terms.w, l.g, l.t);
    stripe_prefix_sums(terms.z, z_total, l.g, l.t);
#pragma unroll
    for (int n = 0; n < kChannelTiles; ++n)
#pragma unroll
      for (int b = 0; b < 2; ++b)
        if (l.g == 0) {  // the lanes holding row 0, whose suffix sums are the stripe's totals
          const int c = cols.of(l, n, b);
          later_totals[w.a * kWidth + c] = terms.w[n][b];
          earlier_totals[w.a * kWidth + c] = z_total[n][b];
        }
  }
  __syncthreads();
  if (!wanted) return;
  T dg[kChannelTiles][4];
#pragma unroll
  for (int n = 0; n < kChannelTiles; ++n)
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      const int c = cols.of(l, n, b);
      T state = 0;
      for (int q = 0; q < ChunkTiles<T>::kStateTermParts; ++q) state += state_parts[q * kWidth + c];
      T later = 0, earlier = state * own_last[c];
      for (int q = 0; q < G::kStripes; ++q) {
        if (q > w.a) later += later_totals[q * kWidth + c];
        if (q < w.a) earlier += earlier_totals[q * kWidth + c];
      }
      for (int e = b; e < 4; e += 2) dg[n][e] = (terms.w[n][e] + later) + (earlier + terms.z[n][e]);
    }
  const int64_t p0 = p.index * C;
  if (mode == kChannelDecay) {
    store_rows(dg, out, p, part, w, steps, c0, width);
    return;
  }
  // One decay per step: each position's sum over the 64 channels, the warp's 64 / kSplit first
  // (across the lane's elements, then its quad), then the kSplit warps' in order.
  T* row_parts = earlier_totals + G::kStripes * kWidth;  // (kSplit, kChunk)
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    T sum = 0;
#pragma unroll
    for (int n = 0; n < kChannelTiles; ++n) sum += dg[n][2 * half] + dg[n][2 * half + 1];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (l.t == 0) row_parts[w.h * C + w.r0() + l.g + 8 * half] = sum;
  }
  __syncthreads();
  for (int t = threadIdx.x; t < C; t += G::kThreads) {
    T sum = 0;
    for (int h = 0; h < kSplit; ++h) sum += row_parts[h * C + t];
    if (p0 + t < steps) out.store(out.offset(p.b, p.h, p0 + t, part), sum);
  }
}

// The gradient of the chunk's values (x = v) or keys (x = k), the part of a side's pass that runs
// back in time. The caller has just left the causal scores of the other side in s.stripes (A =
// q k^T for dv, dA = dout v^T for dk) and their s = t terms in diag; with score_cols the scores'
// second operand (k for dv, v for dk),
//   dx~      = the anti-causal decayed product of the scores with `carried` (dout for dv, q for dk),
//   dx^state = score_cols through dh', decayed to the chunk's end,
//   dx       = dx~ + diag carried + dx^state (rescaled in a mild chunk),
// and the side's decay-gradient terms w -= x dx~, z = x dx^state (the file's header). In a mild
// chunk score_cols carry the other side's exp(-L_s), and other_last (that side's exp(L_last); null
// where it does not decay) takes them to the chunk's end.
template <Products kProducts, bool kStateTransposed, class T>
__device__ void input_gradient(T (&dx)[kChannelTiles][4], DecayTerms<T>& terms, const ChunkTiles<T>& s,
                               const WarpPart& w, const T* diag, const T* score_cols, const Side<T>& other,
                               const T* other_last, const T* x, const T* carried, const Side<T>& own,
                               const Scaling<T>& scaling) {
  constexpr int P = Geometry<T>::kPitch;
  const int r0 = w.r0();
  const bool mild = scaling.mild;
  zero(dx);
  decayed_product<kProducts, false>(dx, s.stripes, carried, own, w);
  T state[kChannelTiles][4];
  zero(state);
  through_state<kProducts, kStateTransposed>(state, score_cols, other, s.dh, w, true, mild ? other_last : nullptr);
  for_each_element(w, [&](int n, int e, int t, int c) {
    const T through = state[n][e] * scaling.to_end(t, c);
    terms.w[n][e] -= x[t * P + c] * dx[n][e];
    terms.z[n][e] = (mild ? x[t * P + c] * scaling.from_start(t, c) : x[t * P + c]) * through;
    const T sum = dx[n][e] + diag[t - r0] * carried[t * P + c];
    dx[n][e] = (mild ? sum * scaling.inverse(t, c) : sum) + through;
  });
}

// The gradients of one chunk once prepare_chunk has run (kMild: see chunk_output_body): dq, dk over
// the key tile (partial sums over value tiles), dv over the value tile (partial over key tiles),
// and both decay gradients. In a mild chunk the tiles hold q+, k-, v-, do+ (prepare_chunk), the
// products run without decay, and each gradient's chunk part is rescaled at the end; the terms
// through dh' keep the decay to the chunk's end (<= 1) as a factor of their own, so no two large
// factors meet. Each side's causal scores serve its forward-in-time product and, read transposed,
// its backward-in-time one (input_gradient).
template <class T, Products kProducts, bool kMild, bool kChained>
__device__ __forceinline__ void chunk_gradient_body(const ChunkTiles<T>& s, const ScanArgs<T>& a, const Place& p,
                                                    TicketAhead& next) {
  using G = Geometry<T>;
  constexpr int P = G::kPitch, N = G::kThreads;
  const int64_t kc = kWidth * p.kt, vc = kWidth * p.vt;

  const Scaling<T> key{kMild, {s.Lk, a.key_mode}, mild_factors<T>(s.Lk), s.key_last};
  const Scaling<T> value{kMild, {s.Lv, a.value_mode}, mild_factors<T>(s.Lv), s.value_last};
  // The sides the products see: none once the decays are factored out of the operands.
  const Side<T> key_p{s.Lk, kMild ? kNoDecay : a.key_mode}, value_p{s.Lv, kMild ? kNoDecay : a.value_mode};
  // When the state passes between the blocks: the chunk's own update of the state's gradient, W,
  // from dout and q decayed from its start (prepare_chunk); then the chain: dh' (the gradient
  // after the chunk) into s.dh, and the gradient before the chunk on to the block of the one before.
  if constexpr (kChained) {
    T update[G::kStateRows][kChannelTiles][4];
    chunk_update<kProducts>(update, kMild || a.value_mode == kNoDecay ? s.dout : s.z,
                            kMild || a.key_mode == kNoDecay ? s.q : s.w, warp_part());
    pass_state<true, kProducts>(update, s.dh, s, a, p);
  }
  // The decay gradients' term of the carried state: dh'_ji exp(Lv_last,j) h_ji exp(Lk_last,i),
  // summed over rows j for the key side (exp(Lk_last,i) left for the end) and over columns i for
  // the value side (exp(Lv_last,j) likewise). Half the block takes each side: a thread per channel
  // and part of the other index, kStateTermParts parts, added up in order by write_decay_gradient.
  // A warp's lanes are 32 neighbouring channels: the key side's read 32 neighbouring words of a
  // row; the value side's read down 32 rows (68 words apart, so 8 banks) and walk their columns
  // in an order skewed by row (the low 2 bits of the column offset by c / 8): 32 banks.
  {
    constexpr int kParts = ChunkTiles<T>::kStateTermParts, kTerms = kWidth / kParts;
    static_assert(kParts * 2 * kWidth == N && kTerms % 4 == 0, "whole parts of whole skewed runs");
    const int c = threadIdx.x % kWidth, part = threadIdx.x % (N / 2) / kWidth;
    const bool key_side = threadIdx.x < N / 2;
    T sum = 0;
#pragma unroll 4
    for (int u = 0; u < kTerms; ++u) {
      const int o = part * kTerms + (key_side ? u : (u & ~3) | ((u + (c >> 3)) & 3));
      const int j = key_side ? o : c, i = key_side ? c : o;
      sum += s.dh[j * P + i] * s.h[j * P + i] * (key_side ? s.value_last[j] : s.key_last[i]);
    }
    (key_side ? s.gk_state : s.gv_state)[part * kWidth + c] = sum;
  }

  const WarpPart w = warp_part();
  const int r0 = w.r0();
  T* stripe = s.stripes + w.a * kSub * G::kStripePitch;
  T* diag = s.diag + w.a * kSub;
  T acc[kChannelTiles][4], tmp[kChannelTiles][4];
  DecayTerms<T> terms;
  const int64_t scalar_part = static_cast<int64_t>(p.vt) * a.key_tiles + p.kt;

  // ---- the value side: dv, and dgv from w = o~ do - v dv~ and z = v dv^state.
  // dv needs the scores A = q k^T (rows t); o~ = A v + q h, the forward's output again, only dgv.
  if (a.value_mode != kNoDecay && a.grad_gv.present()) {
    causal_parts<kProducts, false>(acc, tmp, s, stripe, diag, s.q, s.k, key_p, s.v, value_p, w);
    for_each_element(w, [&](int n, int e, int t, int j) {
      const T inter = kMild ? tmp[n][e] : tmp[n][e] * value.from_start(t, j);
      terms.w[n][e] = (acc[n][e] + inter) * s.dout[t * P + j];  // o~ do
    });
  } else {
    score_stripe<kProducts>(stripe, diag, s.q, s.k, key_p, w);
    zero(terms.w);
  }
  // A mild chunk's terms through dh' take the other side's exp(L_last) (input_gradient), which is 1
  // where that side does not decay: then none, and no multiply and rounding per operand element.
  const T* key_last = a.key_mode == kNoDecay ? nullptr : s.key_last;
  const T* value_last = a.value_mode == kNoDecay ? nullptr : s.value_last;
  input_gradient<kProducts, false>(acc, terms, s, w, diag, s.k, key_p, key_last, s.v, s.dout, value_p, value);  // dv
  store_rows(acc, a.grad_v, p, p.kt, w, a.steps, vc, a.dv);
  write_decay_gradient(terms, s.gv_state, s.value_last, a.value_mode, a.grad_gv, p, w,
                       a.value_mode == kScalarDecay ? scalar_part : p.kt, a.steps, vc, a.dv, s.w);

  // ---- the key side: dq, dk, and dgk from w = q dq~ - k dk~ and z = k dk^state.
  causal_parts<kProducts, true>(acc, tmp, s, stripe, diag, s.dout, s.v, value_p, s.k, key_p, w);  // dA = do v^T
  for_each_element(w, [&](int n, int e, int t, int i) {
    acc[n][e] += kMild ? tmp[n][e] : tmp[n][e] * key.from_start(t, i);  // dq~
    terms.w[n][e] = s.q[t * P + i] * acc[n][e];
    const T dq = acc[n][e] + diag[t - r0] * s.k[t * P + i];
    acc[n][e] = kMild ? dq * key.from_start(t, i) : dq;
  });
  store_rows(acc, a.grad_q, p, p.vt, w, a.steps, kc, a.dk);
  next.ask();  // with dk and dgk still to come (for_block_chunk)
  input_gradient<kProducts, true>(acc, terms, s, w, diag, s.v, value_p, value_last, s.k, s.q, key_p, key);  // dk
  store_rows(acc, a.grad_k, p, p.vt, w, a.steps, kc, a.dk);
  write_decay_gradient(terms, s.gk_state, s.key_last, a.key_mode, a.grad_gk, p, w,
                       a.key_mode == kScalarDecay ? scalar_part : p.vt, a.steps, kc, a.dk, s.z);
}

// One block per (sub-problem, sequence, chunk): chunk_gradient_body after prepare_chunk.
template <class T, Products kProducts, bool kChained, bool kPersistent>
__global__ void __launch_bounds__(Geometry<T>::kThreads, 1) chunk_gradient_kernel(ScanArgs<T> a) {
  for_block_chunk<kProducts, kChained, kPersistent>(
      a, true, [&](const ChunkTiles<T>& s, const Place& p, auto mild, TicketAhead& next) {
        chunk_gradient_body<T, kProducts, decltype(mild)::value, kChained>(s, a, p, next);
      });
}

// out (strided) = the sum of n_parts contiguous (sequences, steps, width) partial results, in
// order of the parts (deterministic), rounded once where out is bfloat16.
template <class T>
__global__ void add_parts_kernel(Operand<T> out, const T* parts, int n_parts, int64_t heads, int64_t steps,
                                 int64_t width, int64_t total) {
  LINEA_GRID_STRIDE_LOOP(e, total) {
    const int64_t c = e % width, pos = e / width % steps, seq = e / (width * steps);
    T sum = 0;
    for (int i = 0; i < n_parts; ++i) sum += parts[i * total + e];
    out.store(out.offset(seq / heads, seq % heads, pos, 0) + c, sum);
  }
}

// ---- host side ---------------------------------------------------------------------------------

inline int decay_mode(const Tensor& g) {
  if (!g.defined()) return kNoDecay;
  return g.size(3) == 1 ? kScalarDecay : kChannelDecay;
}

// Whether every row of x starts on 16 bytes and its width fills whole 16-byte pieces.
template <class E>
bool rows_in_vectors(const E* ptr, const Tensor& x) {
  constexpr int64_t V = 16 / sizeof(E);
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && x.size(3) % V == 0 && x.stride(0) % V == 0 &&
         x.stride(1) % V == 0 && x.stride(2) % V == 0;
}

// x (T, or bfloat16 for a bfloat16 scan's tensors: Operand) as an Operand of E (T or const T).
template <class E>
Operand<E> operand_of(const Tensor& x) {
  if (!x.defined()) return {};
  Operand<E> o;
  o.sb = x.stride(0), o.sh = x.stride(1), o.st = x.stride(2);
  if (x.dtype() == kBFloat16) {
    o.narrow = x.data<bfloat16>();
    o.vectors = rows_in_vectors(o.narrow, x);
  } else {
    o.ptr = x.data<std::remove_const_t<E>>();
    o.vectors = rows_in_vectors(o.ptr, x);
  }
  return o;
}
template <class T>
Operand<const T> input_of(const Tensor& x) {
  return operand_of<const T>(x);
}

// An output computed as the sum of `parts` partial results: written directly when there is one,
// else into scratch that add() sums into the output afterwards.
template <class T>
class Output {
 public:
  Output(const Tensor& out, int64_t parts, int device) : out_(out), parts_(parts) {
    if (!out.defined()) return;
    LINEA_CHECK(out.size(3) == 1 || out.stride(3) == 1, "gated_scan", "outputs need contiguous rows, got ",
                out.describe());
    if (parts == 1) {
      operand_ = operand_of<T>(out);
      return;
    }
    // The partial sums in T (float32 for a bfloat16 output), rounded once as add() stores their sum.
    const int64_t width = out.size(3), total = out.size(0) * out.size(1) * out.size(2) * width;
    scratch_ = std::make_unique<DeviceBuffer>(sizeof(T) * static_cast<size_t>(parts * total), device);
    operand_.ptr = scratch_->as<T>();
    operand_.sb = out.size(1) * out.size(2) * width, operand_.sh = out.size(2) * width, operand_.st = width;
    operand_.part = total;
    operand_.vectors = width % (16 / sizeof(T)) == 0;  // rows of width elements from an aligned allocation
  }
  const Operand<T>& operand() const { return operand_; }
  void add(cudaStream_t stream, int device) const {
    if (!scratch_) return;
    const int64_t width = out_.size(3), total = out_.size(0) * out_.size(1) * out_.size(2) * width;
    add_parts_kernel<T><<<blocks_for(total, device), kThreads, 0, stream>>>(
        operand_of<T>(out_), scratch_->as<T>(),
        static_cast<int>(parts_), out_.size(1), out_.size(2), width, total);
    LINEA_CUDA_LAUNCH_CHECK("gated_scan", "adding ", parts_, " tile sums into ", out_.describe());
  }

 private:
  Tensor out_;
  int64_t parts_;
  Operand<T> operand_;
  std::unique_ptr<DeviceBuffer> scratch_;
};

// What every launch needs: the shapes, tiles and decay modes, and the inputs.
template <class T>
ScanArgs<T> args_of(const ScanTensors& in) {
  ScanArgs<T> a{};
  set_recurrence_inputs(a, in, input_of<T>);
  a.heads = in.q.size(1);
  a.sequences = in.q.size(0) * in.q.size(1);
  a.steps = in.q.size(2);
  a.dk = in.q.size(3);
  a.dv = in.v.size(3);
  a.chunks = ceil_div(a.steps, Geometry<T>::kChunk);
  a.key_tiles = static_cast<int>(ceil_div(a.dk, kWidth));
  a.value_tiles = static_cast<int>(ceil_div(a.dv, kWidth));
  a.key_mode = decay_mode(in.gk);
  a.value_mode = decay_mode(in.gv);
  return a;
}

template <class T>
int64_t sub_problems(const ScanArgs<T>& a) {
  return static_cast<int64_t>(a.key_tiles) * a.value_tiles;
}

// A states buffer: kWidth x kWidth per chain (sub-problem and sequence) and slot.
template <class T>
std::unique_ptr<DeviceBuffer> states_buffer(const ScanArgs<T>& a, int64_t slots, int device) {
  const int64_t n = sub_problems(a) * a.sequences * slots * kWidth * kWidth;
  return std::make_unique<DeviceBuffer>(sizeof(T) * static_cast<size_t>(n), device);
}

// Every chunk's decays, exp(Lv_last) then exp(Lk_last) (chunk_decays).
template <class T>
std::unique_ptr<DeviceBuffer> decays_buffer(const ScanArgs<T>& a, int device) {
  const int64_t n = sub_problems(a) * a.sequences * a.chunks * 2 * kWidth;
  return std::make_unique<DeviceBuffer>(sizeof(T) * static_cast<size_t>(n), device);
}

template <class T>
dim3 chunk_grid(const ScanArgs<T>& a) {
  return dim3(static_cast<unsigned>(chunk_count(a)));
}

// The persistent blocks of a per-chunk launch whose state passes between them (for_block_chunk):
// as many as the device holds at once (at most scan_persistent_blocks(), when set), and no more
// than there are chunks.
template <class T, class Kernel>
dim3 persistent_grid(const ScanArgs<T>& a, Kernel kernel, size_t bytes, int device, const char* op) {
  allow_shared_bytes(kernel, bytes, op);
  int per_sm = 0;
  LINEA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Geometry<T>::kThreads, bytes), op);
  int64_t blocks = std::max<int64_t>(1, int64_t{per_sm} * sm_count(device));
  if (scan_persistent_blocks() > 0) blocks = std::min<int64_t>(blocks, scan_persistent_blocks());
  return dim3(static_cast<unsigned>(std::min(blocks, chunk_count(a))));
}

// Whether a launch whose state passes between its blocks makes them persistent: when exactly one
// side decays (the GLA gate, a value-side gate). Measured on H200s at B=8, H=8, d=64 (forward +
// backward, docs/benchmarks.md), persistent blocks ran the GLA gate 4-5% faster at T = 16k and
// ReGLA's gate, both sides decaying, 6-8% slower. The loop over chunks costs registers (both
// kernels take the 128 the block allows, with 8 bytes spilled, against 107 and 111), which the
// kernels of one chunk a block, compiled apart, do not pay.
template <class T>
bool persistent_blocks(const ScanArgs<T>& a) {
  return one_side_decays(a);
}

// Launches one of the per-chunk kernels (kernel<kChained, kPersistent>) over every chunk: a block
// a chunk, or persistent blocks (above).
template <class T, class Kernels>
void launch_per_chunk(const ScanArgs<T>& a, bool chained, size_t bytes, int device, cudaStream_t stream,
                      const char* op, const Kernels& kernels) {
  if (chained && persistent_blocks(a)) {
    const auto kernel = kernels(std::true_type{}, std::true_type{});
    launch_kernel(kernel, persistent_grid(a, kernel, bytes, device, op), Geometry<T>::kThreads, bytes, stream, op, a);
  } else if (chained) {
    launch_kernel(kernels(std::true_type{}, std::false_type{}), chunk_grid(a), Geometry<T>::kThreads, bytes, stream,
                  op, a);
  } else {
    launch_kernel(kernels(std::false_type{}, std::false_type{}), chunk_grid(a), Geometry<T>::kThreads, bytes, stream,
                  op, a);
  }
}

// ScanStatePass::kKernels: the states before every chunk (a.states) and, with kBackward, their
// gradients after every chunk (a.dstates): each chunk's updates in parallel, then the scans over
// chunks. With states_known (the forward kept them) only the gradients' half of both runs. The
// updates' scratch is handed back on return, which is safe once the scan reading it is queued
// (cuda/buffer.h).
template <class T, Products kProducts, bool kBackward>
void compute_states(ScanArgs<T>& a, int device, cudaStream_t stream, bool states_known = false) {
  const char* op = kBackward ? "gated_scan_backward" : "gated_scan";
  const bool forward = !(kBackward && states_known);
  const std::unique_ptr<DeviceBuffer> updates = forward ? states_buffer(a, a.chunks, device) : nullptr;
  const std::unique_ptr<DeviceBuffer> dupdates = kBackward ? states_buffer(a, a.chunks, device) : nullptr;
  const std::unique_ptr<DeviceBuffer> decays = decays_buffer(a, device);
  a.updates = forward ? updates->as<T>() : nullptr;
  a.dupdates = kBackward ? dupdates->as<T>() : nullptr;
  a.decays = decays->as<T>();
  const size_t bytes = sizeof(T) * (6 * Geometry<T>::kChunk * Geometry<T>::kPitch + 2 * kWidth) +
                       sizeof(double) * 32 * kUpdateWarps;
  const int64_t half = sub_problems(a) * a.sequences * kScanBlocks;
  if (!forward) {
    if constexpr (kBackward) {
      launch_kernel(chunk_updates_kernel<T, kProducts, false, true>, chunk_grid(a), 32 * kUpdateWarps, bytes,
                    stream, op, a);
      launch_kernel(state_scan_kernel<T>, dim3(static_cast<unsigned>(half)), kScanThreads, 0, stream, op, a, half,
                    half);
    }
    return;
  }
  launch_kernel(chunk_updates_kernel<T, kProducts, true, kBackward>, chunk_grid(a), 32 * kUpdateWarps, bytes, stream,
                op, a);
  launch_kernel(state_scan_kernel<T>, dim3(static_cast<unsigned>(kBackward ? 2 * half : half)), kScanThreads, 0, stream,
                op, a, half, int64_t{0});
}

// ScanStatePass::kChain: one per-chunk launch's ticket counter and its chains' slots of tagged
// words (chunk_chain.cuh), zeroed on the stream before it (tag 0: nothing written); handed back when
// the returned buffer goes, which is safe once the launch is queued.
template <class T>
std::unique_ptr<DeviceBuffer> start_chain(ScanArgs<T>& a, int device, cudaStream_t stream, const char* op) {
  const size_t words = static_cast<size_t>(sub_problems(a) * a.sequences * kChainSlotWords<T>);
  const size_t bytes = sizeof(TaggedWord) * (words + 1);
  auto counters = std::make_unique<DeviceBuffer>(bytes, device);
  LINEA_CUDA_CHECK(cudaMemsetAsync(counters->as<void>(), 0, bytes, stream), op);
  TaggedWord* slots = counters->as<TaggedWord>();
  a.chain = {reinterpret_cast<unsigned*>(slots + words), slots};
  return counters;
}

// Whether this launch's state passes between its blocks (cuda/backend.h: ScanStatePass).
template <class T>
bool passes_along_chain(const ScanArgs<T>& a, int device) {
  const ScanStatePass pass = scan_state_pass();
  if (pass != ScanStatePass::kAuto) return pass == ScanStatePass::kChain;
  return chain_pays(sub_problems(a) * a.sequences, sm_count(device));  // chain_order.h
}

// The states before every chunk and the final one (slot chunks), as the backward reads them.
template <class T>
int64_t states_elements(const ScanArgs<T>& a) {
  return sub_problems(a) * a.sequences * (a.chunks + 1) * kWidth * kWidth;
}

// chunk_output_kernel over every chunk: o, when a.out is present; with `chained` the states too
// (a.states, a.state_slots per chain), else it reads them there.
template <class T, Products kProducts>
void run_chunk_output(ScanArgs<T>& a, bool chained, int device, cudaStream_t stream) {
  const std::unique_ptr<DeviceBuffer> counters = chained ? start_chain(a, device, stream, "gated_scan") : nullptr;
  launch_per_chunk(a, chained, ChunkTiles<T>::bytes(false), device, stream, "gated_scan",
                   [](auto chained, auto persistent) {
                     return chunk_output_kernel<T, kProducts, decltype(chained)::value, decltype(persistent)::value>;
                   });
  a.chain = {};
}

// The whole-tensor copy of a (B, H, dv, dk) state, or undefined.
inline Tensor contiguous_state(const Tensor& x) { return x.defined() ? contiguous_copy(x) : x; }

// A sequence of no positions passes its state through unchanged: to = from (null: zeros).
template <class T>
void pass_through(T* to, const T* from, const ScanArgs<T>& a, cudaStream_t stream, const char* op) {
  if (to == nullptr) return;
  const size_t bytes = sizeof(T) * static_cast<size_t>(a.sequences * a.dv * a.dk);
  if (from != nullptr) LINEA_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream), op);
  else LINEA_CUDA_CHECK(cudaMemsetAsync(to, 0, bytes, stream), op);
}

template <class T, Products kProducts>
void forward(const ScanTensors& in, const Tensor& out, const Tensor& final_state, Tensor* kept, int device,
             cudaStream_t stream) {
  ScanArgs<T> a = args_of<T>(in);
  const Tensor initial = contiguous_state(in.s0);
  a.s0 = initial.defined() ? initial.data<T>() : nullptr;
  LINEA_CHECK(!final_state.defined() || final_state.is_contiguous(), "gated_scan", "final_state must be contiguous");
  a.final_state = final_state.defined() ? final_state.data<T>() : nullptr;
  if (kept != nullptr) *kept = empty({states_elements(a)}, dtype_of<T>::value, in.q.device());
  if (a.chunks == 0) return pass_through(a.final_state, a.s0, a, stream, "gated_scan");
  const bool chained = passes_along_chain(a, device);
  // The states: the kept tensor for the backward, else scratch handed back on return; passed
  // between the blocks, none but the chain's slots (pass_state).
  std::unique_ptr<DeviceBuffer> scratch;
  a.state_slots = a.chunks + 1;
  if (kept != nullptr) {
    a.states = kept->data<T>();
  } else if (!chained) {
    scratch = states_buffer(a, a.state_slots, device);
    a.states = scratch->as<T>();
  }
  const Output<T> o(out, a.key_tiles, device);
  a.out = o.operand();
  if (!chained) compute_states<T, kProducts, false>(a, device, stream);
  run_chunk_output<T, kProducts>(a, chained, device, stream);
  o.add(stream, device);
}

template <class T, Products kProducts>
void backward(const ScanTensors& in, const Tensor& dout, const Tensor& dfinal, const ScanGrads& g, const Tensor& kept,
              int device, cudaStream_t stream) {
  ScanArgs<T> a = args_of<T>(in);
  const Tensor initial = contiguous_state(in.s0), final_grad = contiguous_state(dfinal);
  a.s0 = initial.defined() ? initial.data<T>() : nullptr;
  a.dfinal = final_grad.defined() ? final_grad.data<T>() : nullptr;
  a.dout = input_of<T>(dout);
  LINEA_CHECK(!g.dinitial.defined() || g.dinitial.is_contiguous(), "gated_scan_backward", "dinitial must be contiguous");
  a.dinitial = g.dinitial.defined() ? g.dinitial.data<T>() : nullptr;
  LINEA_CHECK(!kept.defined() || (kept.numel() == states_elements(a) && kept.dtype() == dtype_of<T>::value),
              "gated_scan_backward", "the kept states ", kept.describe(), " are not those of these inputs (",
              states_elements(a), " elements)");
  if (a.chunks == 0) return pass_through(a.dinitial, a.dfinal, a, stream, "gated_scan_backward");
  const bool chained = passes_along_chain(a, device);
  a.state_slots = a.chunks + 1;
  a.dstate_slots = a.chunks;
  const std::unique_ptr<DeviceBuffer> states = kept.defined() ? nullptr : states_buffer(a, a.state_slots, device);
  // Passed between the blocks, the gradients go through the chain's slots alone (pass_state).
  const std::unique_ptr<DeviceBuffer> dstates = chained ? nullptr : states_buffer(a, a.dstate_slots, device);
  a.states = kept.defined() ? const_cast<T*>(kept.data<T>()) : states->as<T>();
  a.dstates = chained ? nullptr : dstates->as<T>();
  // Without kept states: the forward's again, with the state pass the gradients' pass takes.
  if (!chained) compute_states<T, kProducts, true>(a, device, stream, kept.defined());
  else if (!kept.defined()) run_chunk_output<T, kProducts>(a, true, device, stream);  // no a.out: the states alone
  // Partial sums: dq, dk over value tiles, dv over key tiles; a decay gradient like its side's
  // inputs, or over every tile for one decay per step.
  const int64_t tiles = sub_problems(a);
  const Output<T> dq(g.dq, a.value_tiles, device), dk(g.dk, a.value_tiles, device), dv(g.dv, a.key_tiles, device);
  const Output<T> dgk(g.dgk, a.key_mode == kScalarDecay ? tiles : a.value_tiles, device);
  const Output<T> dgv(g.dgv, a.value_mode == kScalarDecay ? tiles : a.key_tiles, device);
  a.grad_q = dq.operand();
  a.grad_k = dk.operand();
  a.grad_v = dv.operand();
  a.grad_gk = dgk.operand();
  a.grad_gv = dgv.operand();
  const std::unique_ptr<DeviceBuffer> counters =
      chained ? start_chain(a, device, stream, "gated_scan_backward") : nullptr;
  launch_per_chunk(a, chained, ChunkTiles<T>::bytes(true), device, stream, "gated_scan_backward",
                   [](auto chained, auto persistent) {
                     return chunk_gradient_kernel<T, kProducts, decltype(chained)::value, decltype(persistent)::value>;
                   });
  for (const Output<T>* x : {&dq, &dk, &dv, &dgk, &dgv}) x->add(stream, device);
}

}  // namespace linea::cuda::chunked

// The entry points (chunked_scan.h) of one precision, instantiated at global scope: each of
// chunked_scan_{tf32,bf16,f32,f64}.cu names its own in one line (LINEA_CHUNKED_SCAN_INSTANCE(float, kTF32)),
// so that the four precisions compile in parallel.
#define LINEA_CHUNKED_SCAN_INSTANCE(T, PRODUCTS)                                                                    \
  namespace linea::cuda::chunked {                                                                                  \
  template void forward<T, Products::PRODUCTS>(const ScanTensors&, const Tensor&, const Tensor&, Tensor*, int,      \
                                               cudaStream_t);                                                       \
  template void backward<T, Products::PRODUCTS>(const ScanTensors&, const Tensor&, const Tensor&, const ScanGrads&, \
                                                const Tensor&, int, cudaStream_t);                                  \
  }
