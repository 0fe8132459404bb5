// Causal softmax attention on the tensor cores, in TF32: the same algorithm as the exact kernels
// of attention.cu (FlashAttention-2's online softmax forward; a backward that recomputes the
// probabilities, with dk/dv owned by key-tile blocks and dq by query-tile blocks, so no atomics
// and the same bits on every run), but every tile product is a warp-wide mma.sync.m16n8k8 with
// TF32 inputs (10-bit mantissa, rounded to nearest) and float32 accumulation. Used for float32
// while TF32 is on (cuda::set_tf32, LINEA_TF32), like the cuBLAS matmuls; off, attention.cu's
// exact kernels run.
//
// Work split: a block is 4 warps; each warp owns 16 rows of the block's 64-row tile (query rows in
// the forward and dq kernels, key rows in the dk/dv kernel) and computes their 16 x 64 score tile
// against the streamed tile as 8 column blocks of 8. At head dim 64 the bfloat16 kernels give
// each warp two such 16-row blocks (a 128-row tile: kForwardFragments, BackwardRows).
//
// Fragments: see mma.cuh.
// A score tile is produced in C layout and consumed as the A operand of the next product (P V,
// dS K, ...). The layouts differ, but the contraction index of that product is ours to number:
// calling column 2t "k = t" and column 2t+1 "k = t+4" makes a thread's C registers exactly its A
// registers (c0 c2 c1 c3), so no shuffles are needed; the B operand is read with the same
// numbering (rows 2t and 2t+1 of the streamed tile).
//
// Shared tiles have rows of D + 4 floats: both B access patterns above (8 rows g x 4 columns t,
// and 4 row pairs 2t x 8 columns g) then fall in 32 different banks. Tiles are rounded to TF32
// once, when stored to shared memory.
//
// bfloat16 (E = bfloat16) runs the same kernels with bfloat16 tiles and products
// (TileOps<D, bfloat16>): shared rows of D + 8 bfloat16, mma.sync.m16n8k16 with bfloat16 inputs
// (twice TF32's rate) and float32 accumulation. The score tile's C fragments of two neighbouring
// 8-column blocks are one A fragment of the next product's 16-key step, rounded to bfloat16 pairs
// (as FlashAttention-2 does); its B operand, the streamed tile read along keys, comes transposed
// from ldmatrix.trans. lse, delta and the softmax statistics stay float32; the outputs are
// rounded once as they are stored. The streamed bfloat16 tiles are double-buffered with cp.async
// (stream_key_tiles, stream_query_tiles).
#include <cmath>
#include <limits>
#include <type_traits>

#include "cuda/kernels/attention_tiles.cuh"
#include "cuda/kernels/cp_async.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/pack.cuh"

namespace linea::cuda::attention_tiles {

namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // rows of a block's own tile
constexpr int kCols = 64;           // rows of a streamed tile (the score tile's columns)
constexpr float kLog2e = 1.4426950408889634f;

// How tiles of E live in shared memory and are multiplied, per head dim D (padded to 32, 64 or
// 128). stored: an element as the tile keeps it (load_rows). score_tile: acc (16 x 64, C layout)
// = rows [row0, row0 + 16) of `rows` times the 64 rows of `cols`, transposed (a score tile,
// contracted over the head dim). accumulate_product: out (16 x D, C layout) += s (16 x 64, C
// layout) times the 64 x D tile `m`, contracted over the tile's 64 rows.
template <int D, class E>
struct TileOps;

// float32 on TF32 mma.m16n8k8. Shared rows of D + 4 floats: both B access patterns (8 rows g x 4
// columns t, and 4 row pairs 2t x 8 columns g) fall in 32 different banks. Tiles are rounded to
// TF32 once, as they are stored. The product's contraction index is numbered as the header says.
template <int D>
struct TileOps<D, float> {
  using Smem = float;
  static constexpr int kPitch = D + 4;

  // An element as its tile stores it: rounded to TF32 once.
  __device__ __forceinline__ static float stored(float x) { return to_tf32(x); }

  // The A operand of k-step kk: rows row, row + 8 and columns 8 kk + t, + 4 of a shared tile.
  __device__ __forceinline__ static void load_a(float (&a)[4], const float* tile, int row, int kk, int t) {
    const float* r0 = tile + row * kPitch + 8 * kk + t;
    a[0] = r0[0];
    a[1] = r0[8 * kPitch];
    a[2] = r0[4];
    a[3] = r0[8 * kPitch + 4];
  }

  __device__ __forceinline__ static void score_tile(float (&acc)[8][4], const float* rows, int row0, const float* cols,
                                                    int g, int t) {
#pragma unroll
    for (int n = 0; n < 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 8; ++kk) {
      float a[4];
      load_a(a, rows, row0 + g, kk, t);
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const float* b = cols + (8 * n + g) * kPitch + 8 * kk + t;
        mma_tf32(acc[n], a, b[0], b[4]);
      }
    }
  }

  __device__ __forceinline__ static void accumulate_product(float (&out)[D / 8][4], const float (&s)[8][4],
                                                            const float* m, int g, int t) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float a[4] = {to_tf32(s[j][0]), to_tf32(s[j][2]), to_tf32(s[j][1]), to_tf32(s[j][3])};
      const float* b = m + (8 * j + 2 * t) * kPitch + g;
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) mma_tf32(out[dn], a, b[8 * dn], b[kPitch + 8 * dn]);
    }
  }

  // A warp's F 16-row blocks (kForwardFragments, BackwardRows): float32 tiles keep one, read from
  // the shared tile at every product (kHold is bfloat16's choice; float32 never holds).
  template <int F, bool kHold = false>
  struct Rows {
    const float* tile;
    int row0;
  };
  template <int F, bool kHold = false>
  __device__ __forceinline__ static Rows<F, kHold> row_fragments(const float* tile, int row0) {
    return {tile, row0};
  }
  template <int F, bool kHold>
  __device__ __forceinline__ static void score_tiles(float (&acc)[F][8][4], const Rows<F, kHold>& rows,
                                                     const float* cols) {
    const FragmentLane l = fragment_lane();
#pragma unroll
    for (int f = 0; f < F; ++f) score_tile(acc[f], rows.tile, rows.row0 + 16 * f, cols, l.g, l.t);
  }
  template <int F>
  __device__ __forceinline__ static void accumulate_products(float (&out)[F][D / 8][4], const float (&s)[F][8][4],
                                                             const float* m) {
    const FragmentLane l = fragment_lane();
#pragma unroll
    for (int f = 0; f < F; ++f) accumulate_product(out[f], s[f], m, l.g, l.t);
  }
};

// bfloat16 on mma.m16n8k16. Shared rows of D + 8 bfloat16 (16 bytes of padding): rows stay 16-byte
// aligned for ldmatrix, and 8 rows read at the same column fall 4 banks apart. Every operand comes
// from ldmatrix.x4 (mma.cuh: load_matrices), four registers an instruction: a 32-bit load per
// register made the kernels issue-bound (ncu: 5.8 cycles per issued instruction at 4 warps per
// scheduler, a third of the instructions loads).
template <int D>
struct TileOps<D, bfloat16> {
  using Smem = bfloat16;
  static constexpr int kPitch = D + 8;

  __device__ __forceinline__ static bfloat16 stored(bfloat16 x) { return x; }

  // One 16-row score tile of a warp (dk/dv's dp^T): the F = 1 case of score_tiles below.
  __device__ __forceinline__ static void score_tile(float (&acc)[8][4], const bfloat16* rows, int row0,
                                                    const bfloat16* cols, int /*g*/, int /*t*/) {
    score_tiles<1>(reinterpret_cast<float(&)[1][8][4]>(acc), row_fragments<1>(rows, row0), cols);
  }

  // F 16-row blocks of a warp (kForwardFragments, BackwardRows). Each B fragment the products
  // below load serves all F blocks: F times the products per shared-memory load (ncu put the shared
  // loads of one 16-row block per warp at 64 - 79% of the memory pipes). kHold keeps the A
  // fragments of every k-step in registers for the whole loop over the streamed tiles (the
  // forward's two blocks); otherwise they are read at each k-step (one block, and the backward's
  // two: BackwardRows says why): held at head dims 32 and 128 with one block, they took 56 and 104
  // registers more, and blocks per SM with them.
  template <int F, bool kHold = (F > 1)>
  struct Rows {
    static constexpr bool kHeld = kHold;
    uint32_t a[kHeld ? F : 1][kHeld ? D / 16 : 1][4];
    const bfloat16* tile;
    int row0;
    // The A fragment of block f at k-step kk: matrices (rows 0-7, 8-15) x (columns 0-7, 8-15) of
    // the k-step, in fragment order.
    __device__ __forceinline__ void fragment(uint32_t (&out)[4], int f, int kk) const {
      if constexpr (kHeld) {
#pragma unroll
        for (int i = 0; i < 4; ++i) out[i] = a[f][kk][i];
      } else {
        load(out, tile, row0, f, kk);
      }
    }
    __device__ __forceinline__ static void load(uint32_t (&out)[4], const bfloat16* tile, int row0, int f, int kk) {
      const int lane = static_cast<int>(threadIdx.x % 32);
      load_matrices(out, tile + (row0 + 16 * f + lane % 16) * kPitch + 16 * kk + 8 * (lane / 16));
    }
  };
  template <int F, bool kHold = (F > 1)>
  __device__ __forceinline__ static Rows<F, kHold> row_fragments(const bfloat16* tile, int row0) {
    Rows<F, kHold> rows;
    rows.tile = tile;
    rows.row0 = row0;
    if constexpr (kHold)
#pragma unroll
      for (int f = 0; f < F; ++f)
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) Rows<F, kHold>::load(rows.a[f][kk], tile, row0, f, kk);
    return rows;
  }

  // acc[f] (16 x 8 kN, C layout) = block f of `rows` times the first 8 kN rows of `cols`,
  // transposed (a score tile, 64 columns with kN = 8, contracted over the head dim).
  template <int F, bool kHold, int kN>
  __device__ __forceinline__ static void score_tiles(float (&acc)[F][kN][4], const Rows<F, kHold>& rows,
                                                     const bfloat16* cols) {
    static_assert(kN % 2 == 0, "column blocks in pairs");
    const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[F][4];
#pragma unroll
      for (int f = 0; f < F; ++f) rows.fragment(a[f], f, kk);
#pragma unroll
      for (int n = 0; n < kN; n += 2) {
        // B of column blocks n and n + 1: their 8 rows of `cols`, at columns 0-7 and 8-15.
        uint32_t b[4];
        load_matrices(b, cols + (8 * n + lane % 8 + 8 * (lane / 16)) * kPitch + 16 * kk + 8 * (lane / 8 % 2));
#pragma unroll
        for (int f = 0; f < F; ++f) {
          if (kk == 0) {  // the first k-step starts the sums (32 register zeroings a tile fewer)
            mma_bf16_from_zero(acc[f][n], a[f], b[0], b[1]);
            mma_bf16_from_zero(acc[f][n + 1], a[f], b[2], b[3]);
          } else {
            mma_bf16(acc[f][n], a[f], b[0], b[1]);
            mma_bf16(acc[f][n + 1], a[f], b[2], b[3]);
          }
        }
      }
    }
  }

  // out[f] (16 x D, C layout) += s[f] (16 x 64, C layout) times the 64 x D tile `m`, contracted
  // over the tile's 64 rows.
  template <int F>
  __device__ __forceinline__ static void accumulate_products(float (&out)[F][D / 8][4], const float (&s)[F][8][4],
                                                             const bfloat16* m) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // 16 keys a step: score blocks 2j and 2j + 1, as A fragments
      uint32_t a[F][4];
#pragma unroll
      for (int f = 0; f < F; ++f) pack_step(a[f], s[f], j);
      accumulate_step<F>(out, a, m, j);
    }
  }

  // The same from score tiles already rounded to A fragments (pack_step): the dk/dv kernel's
  // two-block warps keep p^T and ds^T that way, in half the registers.
  template <int F>
  __device__ __forceinline__ static void accumulate_packed(float (&out)[F][D / 8][4], const uint32_t (&a)[F][4][4],
                                                           const bfloat16* m) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t step[F][4];
#pragma unroll
      for (int f = 0; f < F; ++f)
#pragma unroll
        for (int i = 0; i < 4; ++i) step[f][i] = a[f][j][i];
      accumulate_step<F>(out, step, m, j);
    }
  }

  // A score tile (16 x 64, C layout) as the A fragments of the four 16-column steps of a product
  // contracted over its columns: register i of step j holds columns 8 (2j + i / 2) + 2t, + 1 of
  // row g + 8 (i % 2), rounded to a bfloat16 pair.
  template <int kN>
  __device__ __forceinline__ static void pack_step(uint32_t (&a)[4], const float (&s)[kN][4], int j) {
    a[0] = pack_bf16(s[2 * j][0], s[2 * j][1]);
    a[1] = pack_bf16(s[2 * j][2], s[2 * j][3]);
    a[2] = pack_bf16(s[2 * j + 1][0], s[2 * j + 1][1]);
    a[3] = pack_bf16(s[2 * j + 1][2], s[2 * j + 1][3]);
  }
  // out[f] += a[f] (the A fragments of step j) times the step's 16 rows of m.
  template <int F>
  __device__ __forceinline__ static void accumulate_step(float (&out)[F][D / 8][4], const uint32_t (&a)[F][4],
                                                         const bfloat16* m, int j) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    // B of column blocks dn and dn + 1: the step's 16 rows of m at columns 8 dn and 8 dn + 8,
    // transposed.
    const bfloat16* row = m + (16 * j + lane % 16) * kPitch + 8 * (lane / 16);
#pragma unroll
    for (int dn = 0; dn < D / 8; dn += 2) {
      uint32_t b[4];
      load_matrices<true>(b, row + 8 * dn);
#pragma unroll
      for (int f = 0; f < F; ++f) {
        mma_bf16(out[f][dn], a[f], b[0], b[1]);
        mma_bf16(out[f][dn + 1], a[f], b[2], b[3]);
      }
    }
  }
};

// A thread's 16-byte pieces of a tile of kRows rows of D elements of E: the block's threads cover
// kRowsPerPass whole rows a pass, so a thread's column and its rows' spacing stay fixed, and its
// global and shared addresses advance by constants from pass to pass.
template <int kRows, int D, class E>
struct TilePieces {
  static constexpr int V = kPack<E>, kPerRow = D / V, kRowsPerPass = kThreads / kPerRow;
  static constexpr int kPasses = kRows / kRowsPerPass;
  static_assert(kThreads % kPerRow == 0 && kRows % kRowsPerPass == 0, "whole rows a pass");
  int row = static_cast<int>(threadIdx.x) / kPerRow, col = V * (static_cast<int>(threadIdx.x) % kPerRow);
};

// Whether rows `stride` apart at src can be read 16 bytes at a time.
template <class E>
__device__ __forceinline__ bool sixteen_byte_rows(const E* src, int64_t stride, int64_t dh) {
  return dh % kPack<E> == 0 && stride % kPack<E> == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0;
}

// Rows [row0, row0 + kRows) of a (n_rows, dh) matrix of E whose rows are `stride` apart into
// shared rows of TileOps<D, E>::kPitch, as TileOps::stored keeps them; zeros past n_rows and dh.
// 16 bytes a load where the rows allow it.
template <int kRows, int D, class E>
__device__ __forceinline__ void load_rows(typename TileOps<D, E>::Smem* dst, const E* src, int64_t stride,
                                          int64_t row0, int64_t n_rows, int64_t dh) {
  using Ops = TileOps<D, E>;
  using Pieces = TilePieces<kRows, D, E>;
  constexpr int V = Pieces::V, P = Ops::kPitch;
  if (sixteen_byte_rows(src, stride, dh)) {
    const Pieces my;
    const E* from = src + (row0 + my.row) * stride + my.col;
#pragma unroll
    for (int i = 0; i < Pieces::kPasses; ++i) {
      const int r = my.row + i * Pieces::kRowsPerPass;
      Pack<E, V> x{};
      if (row0 + r < n_rows && my.col < dh) x = load_pack<E, V>(from + i * Pieces::kRowsPerPass * stride);
#pragma unroll
      for (int j = 0; j < V; ++j) x.v[j] = Ops::stored(x.v[j]);
      store_pack<E, V>(dst + r * P + my.col, x);
    }
  } else {
    for (int e = threadIdx.x; e < kRows * D; e += kThreads) {
      const int r = e / D, c = e % D;
      const int64_t row = row0 + r;
      dst[r * P + c] = Ops::stored(row < n_rows && c < dh ? src[row * stride + c] : E());
    }
  }
}

// The rows of head h of batch b of a (B, heads, T, dh) tensor, as load_rows loads them.
template <int kRows, int D, class E>
__device__ __forceinline__ void load_head_tile(typename TileOps<D, E>::Smem* dst, const E* x, const HeadStrides& xs,
                                               int64_t b, int64_t h, int64_t row0, int64_t n_rows, int64_t dh) {
  load_rows<kRows, D, E>(dst, x + head_offset(xs, b, h, 0), xs.t, row0, n_rows, dh);
}

// load_rows for bfloat16, whose tiles keep the elements as they are: with 16-byte rows the copies
// are cp.async (cuda/kernels/cp_async.cuh), to be committed and waited for by the caller.
template <int kRows, int D>
__device__ __forceinline__ void copy_rows(bfloat16* dst, const bfloat16* src, int64_t stride, int64_t row0,
                                          int64_t n_rows, int64_t dh) {
  using Pieces = TilePieces<kRows, D, bfloat16>;
  if (!sixteen_byte_rows(src, stride, dh)) {
    load_rows<kRows, D, bfloat16>(dst, src, stride, row0, n_rows, dh);
    return;
  }
  const Pieces my;
  const bfloat16* from = src + (row0 + my.row) * stride + my.col;
  bfloat16* to = dst + my.row * TileOps<D, bfloat16>::kPitch + my.col;
  constexpr int kShared = Pieces::kRowsPerPass * TileOps<D, bfloat16>::kPitch;  // a pass, in shared memory
  const int64_t global = Pieces::kRowsPerPass * stride;                         // and in global memory
  if (row0 + kRows <= n_rows && dh == D) {  // a whole tile (most of them): no tests
#pragma unroll
    for (int i = 0; i < Pieces::kPasses; ++i) cp_async16(to + i * kShared, from + i * global, 16);
    return;
  }
#pragma unroll
  for (int i = 0; i < Pieces::kPasses; ++i) {
    const bool inside = row0 + my.row + i * Pieces::kRowsPerPass < n_rows && my.col < dh;
    cp_async16(to + i * kShared, inside ? from + i * global : src, inside ? 16 : 0);
  }
}

// The tiles a block streams over (key tiles in the forward and dq, query tiles in dk/dv) come in
// kStreamBuffers<E> buffers. bfloat16 tiles come in two: the next tile's copies (cp.async) are
// issued before the current one is multiplied, and one barrier a tile both publishes a tile and
// frees the other buffer. float32 tiles pass through registers (rounded to TF32), so loading them
// cannot overlap the products; they keep one buffer and two barriers a tile.
template <class E>
constexpr int kStreamBuffers = std::is_same_v<E, bfloat16> ? 2 : 1;

// Calls f(k0, sK, sV) for each key tile k0 of `span` of K/V head kvh of batch b, in order, with the
// tile in shared memory: the forward's and dq's loop. `buffers` holds kStreamBuffers<E> (K, V)
// pairs.
template <int D, class E, class Tensors, class F>
__device__ __forceinline__ void stream_key_tiles(typename TileOps<D, E>::Smem* buffers, const Tensors& a, int64_t b,
                                                 int64_t kvh, const KeySpan& span, const AttentionShape& s, F&& f) {
  constexpr int kTile = kCols * TileOps<D, E>::kPitch;
  if constexpr (kStreamBuffers<E> == 2) {
    const E* k = a.k + head_offset(a.ks, b, kvh, 0);
    const E* v = a.v + head_offset(a.vs, b, kvh, 0);
    const auto fetch = [&](int64_t k0, int buffer) {
      copy_rows<kCols, D>(buffers + 2 * buffer * kTile, k, a.ks.t, k0, s.tk, s.dh);
      copy_rows<kCols, D>(buffers + (2 * buffer + 1) * kTile, v, a.vs.t, k0, s.tk, s.dh);
      cp_async_commit();
    };
    if (span.first > span.last) return;  // no copy left in flight at the block's exit
    fetch(span.first, 0);
    int buffer = 0;
    for (int64_t k0 = span.first; k0 <= span.last; k0 += kCols, buffer ^= 1) {
      cp_async_wait_all();
      // Tile k0 is in for every thread, and every thread is done with the other buffer's tile.
      __syncthreads();
      if (k0 + kCols <= span.last) fetch(k0 + kCols, buffer ^ 1);
      f(k0, buffers + 2 * buffer * kTile, buffers + (2 * buffer + 1) * kTile);
    }
  } else {
    for (int64_t k0 = span.first; k0 <= span.last; k0 += kCols) {
      load_key_tile<load_head_tile<kCols, D, E>>(buffers, buffers + kTile, a, b, kvh, k0, s);
      f(k0, buffers, buffers + kTile);
    }
  }
}

// A thread's place in the fragments (lane = 4 g + t) and its two rows of the block's tile: row
// and row + 8, in its warp's 16.
struct Lane {
  int warp, g, t, row;
};
__device__ __forceinline__ Lane this_lane() {
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
  return {warp, g, static_cast<int>(threadIdx.x % 4), 16 * warp + g};
}
// The column of a score tile that accumulator element e of column block n holds.
__device__ __forceinline__ int score_col(int n, int e, int t) { return 8 * n + 2 * t + e % 2; }

// Max and sum over the 4 lanes (t = 0..3) that share accumulator rows.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Writes a 16 x D accumulator (C layout; rows row0 + g and + 8 of a (rows, dh) matrix of E at
// `base` whose rows are `stride` apart), times `scale[half]`, rounded once into E.
template <int D, class E>
__device__ __forceinline__ void store_rows(E* base, int64_t stride, int64_t row0, int64_t n_rows, int64_t dh,
                                           const float (&acc)[D / 8][4], const float (&scale)[2], int g,
                                           int t) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t row = row0 + g + 8 * half;
    if (row >= n_rows) continue;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int d = 8 * dn + 2 * t + e;
        if (d < dh) base[row * stride + d] = static_cast<E>(acc[dn][2 * half + e] * scale[half]);
      }
  }
}

// The same with one factor for both rows.
template <int D, class E>
__device__ __forceinline__ void store_rows(E* base, int64_t stride, int64_t row0, int64_t n_rows, int64_t dh,
                                           const float (&acc)[D / 8][4], float scale, int g, int t) {
  const float both[2] = {scale, scale};
  store_rows<D>(base, stride, row0, n_rows, dh, acc, both, g, t);
}


// Calls f(n, e, half, seen) for each element of a lane's part of the score tile of the query rows
// at q0 against the key tile at k0 (the forward's and dq's layout): half is 0 for the lane's row
// and 1 for row + 8, seen whether the mask lets that query see that key (all of a whole tile).
template <int kBlockRows = kRows, class F>
__device__ __forceinline__ void for_each_query_score(int64_t q0, int row, int64_t k0, int t, const AttentionShape& s,
                                                     F&& f) {
  // Two copies of the loop, so that the tiles off the diagonal (nearly all) test no mask.
  if (tile_fully_visible(q0, kBlockRows, k0, kCols, s)) {
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) f(n, e, e / 2, true);
  } else {
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) f(n, e, e / 2, visible(q0 + row + 8 * (e / 2), k0 + score_col(n, e, t), s));
  }
}

// 16-row blocks of query rows a forward warp owns: two for bfloat16 at head dim 64 (a block's tile
// of 128 rows), so that every fragment of the streamed tile loaded from shared memory serves two
// products (TileOps::score_tiles; 253 registers, 2 blocks per SM; measured in docs/benchmarks.md);
// one for float32's TF32 kernel, at head dim 128 (where two spilled 536 bytes a thread) and at 32
// (not measured).
template <int D, class E>
constexpr int kForwardFragments = std::is_same_v<E, bfloat16> && D == 64 ? 2 : 1;
template <int D, class E>
constexpr int kForwardRows = kRows * kForwardFragments<D, E>;

template <int D, class E>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(ForwardTensors<E> a, AttentionShape s, float scale_log2) {
  using Ops = TileOps<D, E>;
  using Smem = typename Ops::Smem;
  constexpr int P = Ops::kPitch, N = D / 8, F = kForwardFragments<D, E>, kBlockRows = kForwardRows<D, E>;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  extern __shared__ __align__(16) unsigned char smem[];
  Smem* sQ = reinterpret_cast<Smem*>(smem);

  const QueryTile tile = query_tile<kBlockRows>(s);
  const int64_t kvh = tile.h / (s.heads / s.kv_heads);
  const Lane lane = this_lane();
  const int g = lane.g, t = lane.t, row0 = 16 * F * lane.warp;  // the warp's first row of the block's tile; block f at row0 + 16 f
  load_head_tile<kBlockRows, D, E>(sQ, a.q, a.qs, tile.b, tile.h, tile.q0, s.tq, s.dh);
  __syncthreads();
  const typename Ops::template Rows<F> q_rows = Ops::template row_fragments<F>(sQ, row0);

  // Per block f and half (its rows row0 + 16 f + g and + 8): the output, the running max (log2
  // units) and this lane's part of the row sum.
  float o[F][N][4] = {}, m[F][2], l[F][2];
#pragma unroll
  for (int f = 0; f < F; ++f) m[f][0] = m[f][1] = -kInf, l[f][0] = l[f][1] = 0.f;
  const KeySpan span = key_span<kBlockRows, kCols>(tile.q0, s);
  stream_key_tiles<D, E>(sQ + kBlockRows * P, a, tile.b, kvh, span, s, [&](int64_t k0, const Smem* sK, const Smem* sV) {
    float sc[F][8][4];
    Ops::template score_tiles<F>(sc, q_rows, sK);
#pragma unroll
    for (int f = 0; f < F; ++f) {
      float tile_max[2] = {-kInf, -kInf};
      for_each_query_score<kBlockRows>(tile.q0, row0 + 16 * f + g, k0, t, s, [&](int n, int e, int half, bool seen) {
        sc[f][n][e] = seen ? sc[f][n][e] * scale_log2 : -kInf;  // scores in log2 units
        tile_max[half] = fmaxf(tile_max[half], sc[f][n][e]);
      });
      float base[2];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float m_new = fmaxf(m[f][half], quad_max(tile_max[half]));
        // Nothing visible yet: subtract 0, so that exp2(-inf - 0) = 0 rather than exp2(-inf + inf).
        base[half] = m_new == -kInf ? 0.f : m_new;
        const float alpha = exp2_approx(m[f][half] - base[half]);
        l[f][half] *= alpha;  // this lane's part of the row sum; the 4 parts are added at the end
        m[f][half] = m_new;
#pragma unroll
        for (int dn = 0; dn < N; ++dn) {
          o[f][dn][2 * half] *= alpha;
          o[f][dn][2 * half + 1] *= alpha;
        }
      }
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          sc[f][n][e] = exp2_approx(sc[f][n][e] - base[e / 2]);
          l[f][e / 2] += sc[f][n][e];
        }
    }
    Ops::template accumulate_products<F>(o, sc, sV);
  });

  const int64_t bh = tile.b * s.heads + tile.h;
#pragma unroll
  for (int f = 0; f < F; ++f) {
    float inv[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float sum = quad_sum(l[f][half]);
      inv[half] = sum > 0.f ? 1.f / sum : 0.f;
      const int64_t r = tile.q0 + row0 + 16 * f + g + 8 * half;
      if (t == 0 && r < s.tq) a.lse[bh * s.tq + r] = sum > 0.f ? (m[f][half] + log2f(sum)) / kLog2e : -kInf;
    }
    store_rows<D>(a.out + head_offset(a.os, tile.b, tile.h, 0), a.os.t, tile.q0 + row0 + 16 * f, s.tq, s.dh, o[f], inv,
                  g, t);
  }
}

// Blocks per SM the backward kernels with one 16-row block a warp are compiled for: 3 up to head
// dim 64 caps them at 168 registers (left alone, the bfloat16 dk/dv kernel took 171, and 2
// blocks); the 128 kernels need more than 200 and keep whatever they take.
template <int D>
constexpr int kBackwardBlocks = D <= 64 ? 3 : 1;

// The rows a backward warp owns, in 16-row blocks: as in the forward, two for bfloat16 at head dim
// 64 (a block's tile of 128 query rows in dq, 128 keys in dk/dv), so that every fragment of the
// streamed tile loaded from shared memory serves two products. The warp's own rows' fragments are
// read at each product (Rows<F, false>): held, they would take 64 registers beside the two or three
// accumulators of 64 floats a thread (dq: p, ds, dq; dk/dv: dk, dv, p^T). Such a block takes up to
// 255 registers, 2 blocks per SM; one 16-row block a warp keeps kBackwardBlocks.
// In dk/dv, three of the four products (s^T, dv and dk) share their q and dout fragments between
// the two blocks; the fourth, dp^T, runs one block at a time, its result folded into ds^T at once.
// What is live beside dk and dv is then p^T as bfloat16 fragments (32 registers) and 32 float32
// scores: s^T is computed 32 columns at a time (the whole 64 at once spilled 268 bytes a thread;
// this, 36). Measured in docs/benchmarks.md.
template <int D, class E>
struct BackwardRows {
  static constexpr int kFragments = kForwardFragments<D, E>;  // 16-row blocks a warp
  static constexpr int kBlock = kRows * kFragments;           // rows a block owns
  static constexpr int kBlocksPerSm = kFragments > 1 ? 2 : kBackwardBlocks<D>;
};

// A backward block's shared memory: the two tiles of the kOwnRows rows it owns (keys and values
// for dk and dv, queries and dout for dq), kStreamBuffers<E> pairs of the kCols-row tiles it
// streams over, then, for dk/dv, the streamed query rows' statistics (lse in log2 units, then
// delta: 2 kCols floats a buffer).
template <int D, class E, int kOwnRows>
struct BackwardSmem {
  using Smem = typename TileOps<D, E>::Smem;
  static constexpr size_t kTile = size_t{kCols} * TileOps<D, E>::kPitch;        // elements of a streamed tile
  static constexpr size_t kOwnTile = size_t{kOwnRows} * TileOps<D, E>::kPitch;  // and of an owned one
  static constexpr size_t kTileBytes = (2 * kOwnTile + 2 * kStreamBuffers<E> * kTile) * sizeof(Smem);
  static constexpr size_t bytes(bool with_stats) {
    return kTileBytes + (with_stats ? sizeof(float) * 2 * kCols * kStreamBuffers<E> : 0);
  }
  Smem *own_a, *own_b, *streamed;
  float* stats;
};
template <int D, class E, int kOwnRows>
__device__ __forceinline__ BackwardSmem<D, E, kOwnRows> backward_smem() {
  extern __shared__ __align__(16) unsigned char smem[];
  using Layout = BackwardSmem<D, E, kOwnRows>;
  auto* tiles = reinterpret_cast<typename Layout::Smem*>(smem);
  return {tiles, tiles + Layout::kOwnTile, tiles + 2 * Layout::kOwnTile,
          reinterpret_cast<float*>(smem + Layout::kTileBytes)};
}

// Calls f(h, q0, sQ, sdO, stats) for each query tile (q0) of each query head h of the group of K/V
// head kvh that sees some key of a dk/dv block's tile (rows), in order, with the tiles and their
// statistics (lse in log2 units at stats[0, kCols), delta at stats[kCols, 2 kCols)) in shared
// memory. Each thread moves one statistic: lse of row threadIdx.x (threads below kCols) or delta.
template <int D, class E, int kOwnRows, class F>
__device__ __forceinline__ void stream_query_tiles(const BackwardSmem<D, E, kOwnRows>& smem,
                                                   const BackwardTensors<E>& a, int64_t b, int64_t kvh,
                                                   const RowSpan& rows, const AttentionShape& s, F&& f) {
  static_assert(kThreads == 2 * kCols, "a statistic a thread");
  using Smem = typename TileOps<D, E>::Smem;
  constexpr size_t kTile = BackwardSmem<D, E, kOwnRows>::kTile;
  const int64_t group = s.heads / s.kv_heads, first_q0 = (rows.first / kCols) * kCols, h_end = (kvh + 1) * group;
  if (first_q0 > rows.last) return;  // no copy left in flight at the block's exit
  struct Step {
    int64_t h, q0;
  };
  const auto next = [&](Step step) {
    step.q0 += kCols;
    if (step.q0 > rows.last) step = {step.h + 1, first_q0};
    return step;
  };
  const bool is_lse = threadIdx.x < kCols;
  const auto statistic = [&](const Step& step) {
    const int64_t row = step.q0 + threadIdx.x % kCols;
    if (row >= s.tq) return 0.f;  // rows past tq pad the tile
    const int64_t at = (b * s.heads + step.h) * s.tq + row;
    return is_lse ? a.lse[at] * kLog2e : a.delta[at];
  };
  const auto tiles = [&](int buffer) { return smem.streamed + 2 * buffer * kTile; };
  const auto stats = [&](int buffer) { return smem.stats + 2 * kCols * buffer; };
  if constexpr (kStreamBuffers<E> == 2) {
    const auto fetch = [&](const Step& step, int buffer) {
      copy_rows<kCols, D>(tiles(buffer), a.q + head_offset(a.qs, b, step.h, 0), a.qs.t, step.q0, s.tq, s.dh);
      copy_rows<kCols, D>(tiles(buffer) + kTile, a.dout + head_offset(a.dos, b, step.h, 0), a.dos.t, step.q0, s.tq,
                          s.dh);
      cp_async_commit();
    };
    Step step{kvh * group, first_q0};
    fetch(step, 0);
    stats(0)[threadIdx.x] = statistic(step);
    for (int buffer = 0; step.h < h_end; step = next(step), buffer ^= 1) {
      cp_async_wait_all();
      __syncthreads();  // as in stream_key_tiles
      const Step coming = next(step);
      const bool more = coming.h < h_end;
      float coming_statistic = 0.f;
      if (more) {
        fetch(coming, buffer ^ 1);
        coming_statistic = statistic(coming);  // its load is in flight during the products
      }
      f(step.h, step.q0, tiles(buffer), tiles(buffer) + kTile, stats(buffer));
      if (more) stats(buffer ^ 1)[threadIdx.x] = coming_statistic;
    }
  } else {
    for (Step step{kvh * group, first_q0}; step.h < h_end; step = next(step)) {
      __syncthreads();  // the previous tile's readers are done
      load_head_tile<kCols, D, E>(tiles(0), a.q, a.qs, b, step.h, step.q0, s.tq, s.dh);
      load_head_tile<kCols, D, E>(tiles(0) + kTile, a.dout, a.dos, b, step.h, step.q0, s.tq, s.dh);
      stats(0)[threadIdx.x] = statistic(step);
      __syncthreads();
      f(step.h, step.q0, static_cast<const Smem*>(tiles(0)), static_cast<const Smem*>(tiles(0) + kTile),
        static_cast<const float*>(stats(0)));
    }
  }
}

// What the two backward kernels share: the tile operations, the 16-row blocks of a warp and the
// rows of a block (BackwardRows), and the block's shared memory. Their bodies are members (dkdv and
// dq, below) so that these names are in scope in both without being declared in each; the kernels
// (dkdv_kernel, dq_kernel, after them) only call them.
template <int D, class E>
struct Backward {
  using Ops = TileOps<D, E>;
  using Smem = typename Ops::Smem;
  static constexpr int N = D / 8;                            // 8-column blocks of a 16 x D accumulator
  static constexpr int F = BackwardRows<D, E>::kFragments;   // 16-row blocks a warp
  static constexpr int kBlock = BackwardRows<D, E>::kBlock;  // rows a block owns: keys (dk/dv), queries (dq)
  using Shared = BackwardSmem<D, E, kBlock>;

  static __device__ __forceinline__ void dkdv(const BackwardTensors<E>& a, const AttentionShape& s, float scale_log2);
  static __device__ __forceinline__ void dq(const BackwardTensors<E>& a, const AttentionShape& s, float scale_log2);
};

// One block per (batch, K/V head, BackwardRows::kBlock keys): dk and dv of those keys, over every
// query tile (and query head of the group) that sees them. Warps own key rows; score tiles are
// transposed (keys x queries).
template <int D, class E>
__device__ __forceinline__ void Backward<D, E>::dkdv(const BackwardTensors<E>& a, const AttentionShape& s,
                                                     float scale_log2) {
  const KeyTile kt = key_tile<kBlock>(s);
  const Shared smem = backward_smem<D, E, kBlock>();
  const Smem *sK = smem.own_a, *sV = smem.own_b;
  const Lane lane = this_lane();
  const int g = lane.g, t = lane.t, row0 = 16 * F * lane.warp;  // block f at row0 + 16 f
  load_head_tile<kBlock, D, E>(smem.own_a, a.k, a.ks, kt.b, kt.kvh, kt.k0, s.tk, s.dh);
  load_head_tile<kBlock, D, E>(smem.own_b, a.v, a.vs, kt.b, kt.kvh, kt.k0, s.tk, s.dh);
  // The owned tiles are read after stream_query_tiles' first barrier.
  const auto k_rows = Ops::template row_fragments<F, false>(sK, row0);

  float dk[F][N][4] = {}, dv[F][N][4] = {};
  const RowSpan rows = row_span<kBlock>(kt.k0, s);
  stream_query_tiles<D, E>(smem, a, kt.b, kt.kvh, rows, s, [&](int64_t, int64_t q0, const Smem* sQ, const Smem* sdO,
                                                                const float* stats) {
    const float *sLse = stats, *sDelta = stats + kCols;
    // p^T = exp(scale k.q - lse), recomputed; dv += p^T do.
    const bool whole = tile_fully_visible(q0, kCols, kt.k0, kBlock, s);
    // p^T at column block n (of the tile's 8) from its score; `masked` tests each (key, query):
    // off the diagonal (nearly every tile) no mask is needed.
    const auto probabilities = [&](float (&sc)[4], int f, int n, bool masked) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = score_col(n, e, t);
        const bool seen = !masked || visible(q0 + col, kt.k0 + row0 + 16 * f + g + 8 * (e / 2), s);
        sc[e] = seen ? exp2_approx(sc[e] * scale_log2 - sLse[col]) : 0.f;
      }
    };
    if constexpr (F == 1) {
      float p[F][8][4];
      Ops::template score_tiles<F>(p, k_rows, sQ);
      if (whole) {  // two copies of the loop, as in for_each_query_score
#pragma unroll
        for (int n = 0; n < 8; ++n) probabilities(p[0][n], 0, n, false);
      } else {
#pragma unroll
        for (int n = 0; n < 8; ++n) probabilities(p[0][n], 0, n, true);
      }
      Ops::template accumulate_products<F>(dv, p, sdO);
      // ds^T = p^T (v.do - D), in place of p; dk += ds^T q.
      float dp[8][4];
      Ops::score_tile(dp, sV, row0, sdO, g, t);
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) p[0][n][e] *= dp[n][e] - sDelta[score_col(n, e, t)];
      Ops::template accumulate_products<F>(dk, p, sQ);
    } else {
      // bfloat16, two blocks: p^T is computed 32 columns at a time and rounded to A fragments at
      // once (at most 32 float32 scores live beside dk and dv), and ds^T is formed from those
      // fragments one block at a time in their place. p^T is thus rounded to bfloat16 once more
      // than with one block (where ds^T took p^T in float32): ds^T carries two bfloat16 roundings,
      // like the products' other operands.
      uint32_t pa[F][4][4];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float p[F][4][4];
        Ops::template score_tiles<F>(p, k_rows, sQ + 32 * half * Ops::kPitch);
#pragma unroll
        for (int f = 0; f < F; ++f) {
#pragma unroll
          for (int n = 0; n < 4; ++n) probabilities(p[f][n], f, 4 * half + n, !whole);  // one copy: fewer spills
#pragma unroll
          for (int j = 0; j < 2; ++j) Ops::pack_step(pa[f][2 * half + j], p[f], j);
        }
      }
      Ops::template accumulate_packed<F>(dv, pa, sdO);
#pragma unroll
      for (int f = 0; f < F; ++f) {
        float dp[8][4];
        Ops::score_tile(dp, sV, row0 + 16 * f, sdO, g, t);
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) {  // pack_step's numbering: block n = 2j + i / 2, elements e, e + 1
            const int n = 2 * j + i / 2, e = 2 * (i % 2);
            const float lo = bf16_low(pa[f][j][i]) * (dp[n][e] - sDelta[score_col(n, e, t)]);
            const float hi = bf16_high(pa[f][j][i]) * (dp[n][e + 1] - sDelta[score_col(n, e + 1, t)]);
            pa[f][j][i] = pack_bf16(lo, hi);
          }
      }
      Ops::template accumulate_packed<F>(dk, pa, sQ);
    }
  });
  const float scale = scale_log2 / kLog2e;
#pragma unroll
  for (int f = 0; f < F; ++f) {
    const int64_t key0 = kt.k0 + row0 + 16 * f;
    store_rows<D>(a.dk + head_offset(a.dks, kt.b, kt.kvh, 0), a.dks.t, key0, s.tk, s.dh, dk[f], scale, g, t);
    store_rows<D>(a.dv + head_offset(a.dvs, kt.b, kt.kvh, 0), a.dvs.t, key0, s.tk, s.dh, dv[f], 1.f, g, t);
  }
}

// One block per (batch, head, BackwardRows::kBlock query rows): dq of those rows, streaming over
// the key tiles they see as the forward did.
template <int D, class E>
__device__ __forceinline__ void Backward<D, E>::dq(const BackwardTensors<E>& a, const AttentionShape& s,
                                                   float scale_log2) {
  const QueryTile tile = query_tile<kBlock>(s);
  const int64_t kvh = tile.h / (s.heads / s.kv_heads);
  const Shared smem = backward_smem<D, E, kBlock>();
  Smem *sQ = smem.own_a, *sdO = smem.own_b;
  const Lane lane = this_lane();
  const int g = lane.g, t = lane.t, row0 = 16 * F * lane.warp;  // block f at row0 + 16 f, as in the forward
  load_head_tile<kBlock, D, E>(sQ, a.q, a.qs, tile.b, tile.h, tile.q0, s.tq, s.dh);
  load_head_tile<kBlock, D, E>(sdO, a.dout, a.dos, tile.b, tile.h, tile.q0, s.tq, s.dh);
  float lse[F][2], delta[F][2];
#pragma unroll
  for (int f = 0; f < F; ++f)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const RowStats<float> r = row_stats(a, s, tile.b, tile.h, tile.q0 + row0 + 16 * f + g + 8 * half);
      lse[f][half] = r.lse * kLog2e;
      delta[f][half] = r.delta;
    }
  // The owned tiles are read after stream_key_tiles' first barrier.
  const auto q_rows = Ops::template row_fragments<F, false>(sQ, row0);
  const auto do_rows = Ops::template row_fragments<F, false>(sdO, row0);

  float dq[F][N][4] = {};
  const KeySpan span = key_span<kBlock, kCols>(tile.q0, s);
  stream_key_tiles<D, E>(smem.streamed, a, tile.b, kvh, span, s, [&](int64_t k0, const Smem* sK, const Smem* sV) {
    // ds = p (do.v - D), with p = exp(scale q.k - lse) recomputed; dq += ds k.
    float p[F][8][4], ds[F][8][4];
    Ops::template score_tiles<F>(p, q_rows, sK);
    Ops::template score_tiles<F>(ds, do_rows, sV);
#pragma unroll
    for (int f = 0; f < F; ++f)
      for_each_query_score<kBlock>(tile.q0, row0 + 16 * f + g, k0, t, s, [&](int n, int e, int half, bool seen) {
        const float pe = seen ? exp2_approx(p[f][n][e] * scale_log2 - lse[f][half]) : 0.f;
        ds[f][n][e] = pe * (ds[f][n][e] - delta[f][half]);
      });
    Ops::template accumulate_products<F>(dq, ds, sK);
  });
#pragma unroll
  for (int f = 0; f < F; ++f)
    store_rows<D>(a.dq + head_offset(a.dqs, tile.b, tile.h, 0), a.dqs.t, tile.q0 + row0 + 16 * f, s.tq, s.dh, dq[f],
                  scale_log2 / kLog2e, g, t);
}

// The backward kernels: Backward's bodies, inlined.
template <int D, class E>
__global__ void __launch_bounds__(kThreads, BackwardRows<D, E>::kBlocksPerSm)
    dkdv_kernel(BackwardTensors<E> a, AttentionShape s, float scale_log2) {
  Backward<D, E>::dkdv(a, s, scale_log2);
}
template <int D, class E>
__global__ void __launch_bounds__(kThreads, BackwardRows<D, E>::kBlocksPerSm)
    dq_kernel(BackwardTensors<E> a, AttentionShape s, float scale_log2) {
  Backward<D, E>::dq(a, s, scale_log2);
}

template <class E>
void forward(const ForwardTensors<E>& a, const AttentionShape& s, float scale, cudaStream_t stream) {
  with_head_dim(s.dh, [&]<int D>() {
    const size_t bytes = sizeof(typename TileOps<D, E>::Smem) * (kForwardRows<D, E> + 2 * kStreamBuffers<E> * kCols) *
                         TileOps<D, E>::kPitch;
    launch_tiled(forward_kernel<D, E>, s.batch * s.heads * ceil_div(s.tq, kForwardRows<D, E>), kThreads, bytes, stream,
                 "attention", a, s, scale * kLog2e);
  });
}

template <class E>
void backward(const BackwardTensors<E>& a, const AttentionShape& s, float scale, cudaStream_t stream) {
  with_head_dim(s.dh, [&]<int D>() {
    constexpr int kBlockRows = Backward<D, E>::kBlock;  // keys in dk/dv, query rows in dq
    using Smem = typename Backward<D, E>::Shared;
    const size_t dkdv_bytes = Smem::bytes(true), dq_bytes = Smem::bytes(false);
    launch_tiled(dkdv_kernel<D, E>, s.batch * s.kv_heads * ceil_div(s.tk, kBlockRows), kThreads, dkdv_bytes, stream,
                 "attention_backward", a, s, scale * kLog2e);
    launch_tiled(dq_kernel<D, E>, s.batch * s.heads * ceil_div(s.tq, kBlockRows), kThreads, dq_bytes, stream,
                 "attention_backward", a, s, scale * kLog2e);
  });
}

}  // namespace

bool tf32_attention_available() {
  // The PTX the loaded kernel came from: compute_80 or newer has the mma instructions.
  static const bool available = [] {
    cudaFuncAttributes attributes{};
    return cudaFuncGetAttributes(&attributes, forward_kernel<64, float>) == cudaSuccess && attributes.ptxVersion >= 80;
  }();
  return available;
}

void attention_tf32(const ForwardTensors<float>& a, const AttentionShape& s, float scale, cudaStream_t stream) {
  forward(a, s, scale, stream);
}
void attention_tf32(const ForwardTensors<bfloat16>& a, const AttentionShape& s, float scale, cudaStream_t stream) {
  forward(a, s, scale, stream);
}
void attention_tf32(const BackwardTensors<float>& a, const AttentionShape& s, float scale, cudaStream_t stream) {
  backward(a, s, scale, stream);
}
void attention_tf32(const BackwardTensors<bfloat16>& a, const AttentionShape& s, float scale, cudaStream_t stream) {
  backward(a, s, scale, stream);
}

}  // namespace linea::cuda::attention_tiles
