// Causal softmax attention in the FlashAttention manner (Dao et al. 2022; the FlashAttention-2
// work split), against the CPU oracle (cpu/attention.cpp). No T x T matrix ever exists in
// device memory: scores live in registers and one shared-memory tile at a time.
//
// Forward: one block per (batch, head, tile of BQ query rows). The Q tile stays in shared memory
// while the block streams over the K/V tiles its rows can see, keeping per row a running max m,
// a running sum l of exp(score - m) and an unnormalised output o (the online softmax): a new tile
// with a larger max rescales l and o by exp(m_old - m_new). At the end o / l is the output and
// m + log l the row's logsumexp, saved for backward.
//
// Backward recomputes the probabilities tile by tile from q, k and the saved logsumexp:
//   p = exp(scale q.k - lse),  dv += p do,  dp = do.v,  ds = p (dp - D) with D_i = do_i . o_i,
//   dq += scale ds k,  dk += scale ds q.
// Deterministic without atomics: dk and dv are accumulated in registers by the one block that owns
// their key tile (looping over every query tile, and every query head of the K/V head's group,
// that sees it), and dq by a separate pass with one block per query tile. D comes from a small
// kernel first.
//
// Tiles: every kernel gives each thread RM rows x CN columns of the score tile and the same RM
// rows x DN head dims of its output tile; the 8 threads of a row group are adjacent lanes, so row
// maxima and sums are three shuffles. Head dims are padded with zeros in shared memory to
// D = 32, 64 or 128 (so any dh <= 128 works; more is an error); each shared row is padded by one
// element so that the threads of a warp reading down a column hit different banks. Scores and
// sums are in float32 for float32 inputs (float64 for float64). Tiles that a sliding window or the
// causal mask hides entirely are never loaded; partly hidden ones are masked elementwise.
//
// These are the exact kernels: float64, and float32 while TF32 is off. With TF32 on (the default,
// as for the cuBLAS matmuls) float32 runs the tensor-core version of the same algorithm,
// attention_tf32.cu; attention_tiles.cuh holds what the two share.
#include "cuda/backend.h"
#include "cuda/buffer.h"
#include "cuda/kernels/attention_tiles.cuh"
#include "cuda/kernels/rows.cuh"

namespace linea::cuda {

namespace {

using namespace attention_tiles;

// The thread layout of a tile kernel: kThreads threads in row groups of kCols adjacent lanes.
template <int D, int kRows, int kColumns, int kThreads>
struct Layout {
  static constexpr int kCols = 8;                  // threads sharing a row (a row group)
  static constexpr int kGroups = kThreads / kCols;  // row groups
  static constexpr int RM = kRows / kGroups;       // rows per thread
  static constexpr int CN = kColumns / kCols;      // score columns per thread
  static constexpr int DN = D / kCols;             // head dims per thread
  static constexpr int LD = D + 1;                 // shared row of a Q/K/V/dO tile, padded
  static constexpr int LS = kColumns + 1;          // shared row of a score tile, padded
  static constexpr int kScoreColumns = kColumns;   // columns of the score tile
  static_assert(RM * kGroups == kRows && CN * kCols == kColumns && DN * kCols == D, "tile does not divide");
};

// Rows [row0, row0 + kRows) of a (n_rows, dh) matrix with rows `stride` apart, into shared rows of
// D + 1; zeros past n_rows and dh.
template <int kRows, int D, int kThreads, class T>
__device__ __forceinline__ void load_tile(T* dst, const T* src, int64_t stride, int64_t row0, int64_t n_rows, int64_t dh) {
  for (int e = threadIdx.x; e < kRows * D; e += kThreads) {
    const int r = e / D, c = e % D;
    const int64_t row = row0 + r;
    dst[r * (D + 1) + c] = row < n_rows && c < dh ? src[row * stride + c] : T(0);
  }
}

// The rows of head h of batch b of a (B, heads, T, dh) tensor, as load_tile loads them.
template <int kRows, int D, int kThreads, class T>
__device__ __forceinline__ void load_head_tile(T* dst, const T* x, const HeadStrides& xs, int64_t b, int64_t h,
                                               int64_t row0, int64_t n_rows, int64_t dh) {
  load_tile<kRows, D, kThreads>(dst, x + head_offset(xs, b, h, 0), xs.t, row0, n_rows, dh);
}

// Max and sum over the 8 adjacent lanes of a row group.
template <class T>
__device__ __forceinline__ T row_group_max(T v) {
#pragma unroll
  for (int offset = 1; offset < 8; offset <<= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
template <class T>
__device__ __forceinline__ T row_group_sum(T v) {
#pragma unroll
  for (int offset = 1; offset < 8; offset <<= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The product that follows every score tile (P V, dS K, P^T dO, dS^T Q): acc[i][n] += sum over
// the tile's columns c of S[rg * RM + i][c] X[c][cg + C * n], for a score tile S (rows LS apart)
// and a Q/K/V/dO tile X (rows LD apart), into the thread's RM rows and DN head dims.
template <class L, class T>
__device__ __forceinline__ void accumulate_tile_product(T (&acc)[L::RM][L::DN], const T* S, const T* X, int rg,
                                                        int cg) {
#pragma unroll 4
  for (int c = 0; c < L::kScoreColumns; ++c) {
    T a[L::RM];
#pragma unroll
    for (int i = 0; i < L::RM; ++i) a[i] = S[(rg * L::RM + i) * L::LS + c];
#pragma unroll
    for (int n = 0; n < L::DN; ++n) {
      const T x = X[c * L::LD + cg + L::kCols * n];
#pragma unroll
      for (int i = 0; i < L::RM; ++i) acc[i][n] += a[i] * x;
    }
  }
}

// Writes the thread's part of an output tile: rows row0 + rg * RM + i (those below n_rows) of a
// matrix at `base` whose rows are `stride` apart, head dims cg + C * n (those below dh), row i
// times factor[i].
template <class L, class T>
__device__ __forceinline__ void store_rows(T* base, int64_t stride, int64_t row0, int64_t n_rows, int64_t dh,
                                           const T (&acc)[L::RM][L::DN], const T (&factor)[L::RM], int rg, int cg) {
#pragma unroll
  for (int i = 0; i < L::RM; ++i) {
    const int64_t row = row0 + rg * L::RM + i;
    if (row >= n_rows) continue;
#pragma unroll
    for (int n = 0; n < L::DN; ++n) {
      const int d = cg + L::kCols * n;
      if (d < dh) base[row * stride + d] = acc[i][n] * factor[i];
    }
  }
}

// The same with one factor for every row.
template <class L, class T>
__device__ __forceinline__ void store_rows(T* base, int64_t stride, int64_t row0, int64_t n_rows, int64_t dh,
                                           const T (&acc)[L::RM][L::DN], T factor, int rg, int cg) {
  T factors[L::RM];
#pragma unroll
  for (int i = 0; i < L::RM; ++i) factors[i] = factor;
  store_rows<L>(base, stride, row0, n_rows, dh, acc, factors, rg, cg);
}

// f(i, j) for every element of a thread's RM x CN register tile (its rows rg*RM + i, its columns
// cg + C*j), unrolled.
template <int RM, int CN, class F>
__device__ __forceinline__ void for_tile(F&& f) {
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < CN; ++j) f(i, j);
}

template <class T, int D, int BQ, int BK, int kThreads>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(ForwardTensors<T> a, AttentionShape s, T scale) {
  using L = Layout<D, BQ, BK, kThreads>;
  constexpr int RM = L::RM, CN = L::CN, DN = L::DN, LD = L::LD, LS = L::LS, C = L::kCols;
  constexpr T kInf = std::numeric_limits<T>::infinity();
  extern __shared__ __align__(16) unsigned char smem[];
  T* sQ = reinterpret_cast<T*>(smem);
  T* sK = sQ + BQ * LD;
  T* sV = sK + BK * LD;
  T* sP = sV + BK * LD;  // BQ x LS probabilities of the current key tile

  const QueryTile t = query_tile<BQ>(s);
  const int64_t kvh = t.h / (s.heads / s.kv_heads);
  const int rg = threadIdx.x / C, cg = threadIdx.x % C;
  load_head_tile<BQ, D, kThreads>(sQ, a.q, a.qs, t.b, t.h, t.q0, s.tq, s.dh);

  T m[RM], l[RM], o[RM][DN] = {};
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    m[i] = -kInf;
    l[i] = 0;
  }

  const KeySpan span = key_span<BQ, BK>(t.q0, s);
  for (int64_t k0 = span.first; k0 <= span.last; k0 += BK) {
    load_key_tile<load_head_tile<BK, D, kThreads, T>>(sK, sV, a, t.b, kvh, k0, s);  // also frees sP

    T sc[RM][CN];
    for_tile<RM, CN>([&](int i, int j) { sc[i][j] = 0; });
#pragma unroll 4
    for (int d = 0; d < D; ++d) {
      T qd[RM];
#pragma unroll
      for (int i = 0; i < RM; ++i) qd[i] = sQ[(rg * RM + i) * LD + d];
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        const T kd = sK[(cg + C * j) * LD + d];
#pragma unroll
        for (int i = 0; i < RM; ++i) sc[i][j] += qd[i] * kd;
      }
    }

#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int64_t row = t.q0 + rg * RM + i;
      T tile_max = -kInf;
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        sc[i][j] = visible(row, k0 + cg + C * j, s) ? sc[i][j] * scale : -kInf;
        tile_max = fmax(tile_max, sc[i][j]);
      }
      const T m_new = fmax(m[i], row_group_max(tile_max));
      // Nothing visible yet: subtract 0, so that exp(-inf - 0) = 0 rather than exp(-inf + inf).
      const T base = m_new == -kInf ? T(0) : m_new;
      const T alpha = exp(m[i] - base);
      T sum = 0;
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        sc[i][j] = exp(sc[i][j] - base);
        sum += sc[i][j];
        sP[(rg * RM + i) * LS + cg + C * j] = sc[i][j];
      }
      l[i] = l[i] * alpha + row_group_sum(sum);
      m[i] = m_new;
#pragma unroll
      for (int n = 0; n < DN; ++n) o[i][n] *= alpha;
    }
    __syncthreads();
    accumulate_tile_product<L>(o, sP, sV, rg, cg);  // o += p v
  }

  T inv[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    inv[i] = l[i] > 0 ? T(1) / l[i] : T(0);
    const int64_t row = t.q0 + rg * RM + i;
    if (cg == 0 && row < s.tq) a.lse[(t.b * s.heads + t.h) * s.tq + row] = l[i] > 0 ? m[i] + log(l[i]) : -kInf;
  }
  store_rows<L>(a.out + head_offset(a.os, t.b, t.h, 0), a.os.t, t.q0, s.tq, s.dh, o, inv, rg, cg);
}

// The two register-tiled products each backward kernel needs, sharing one loop over the head
// dim: acc1[i][j] = sum_d r1[row i][d] c1[col j][d] and acc2 likewise from r2 and c2, where the
// thread's rows are rg*RM + i and its columns cg + C*j of shared-memory tiles with row pitch LD.
template <class T, int RM, int CN, int C, int D, int LD>
__device__ __forceinline__ void paired_tile_products(const T* r1, const T* r2, const T* c1, const T* c2, int rg,
                                                     int cg, T (&acc1)[RM][CN], T (&acc2)[RM][CN]) {
  for_tile<RM, CN>([&](int i, int j) { acc1[i][j] = acc2[i][j] = 0; });
#pragma unroll 2
  for (int d = 0; d < D; ++d) {
    T a1[RM], a2[RM];
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      a1[i] = r1[(rg * RM + i) * LD + d];
      a2[i] = r2[(rg * RM + i) * LD + d];
    }
#pragma unroll
    for (int j = 0; j < CN; ++j) {
      const T b1 = c1[(cg + C * j) * LD + d], b2 = c2[(cg + C * j) * LD + d];
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        acc1[i][j] += a1[i] * b1;
        acc2[i][j] += a2[i] * b2;
      }
    }
  }
}

// forward was p = exp(scale q.k - lse), so: p recomputed from the score of (query, key), 0 where
// the mask hides the key. Both backward kernels then take ds = p (dp - D).
template <class T>
__device__ __forceinline__ T recomputed_p(T score, T scale, T lse, int64_t query, int64_t key,
                                          const AttentionShape& s) {
  return visible(query, key, s) ? exp(score * scale - lse) : T(0);
}

// D_i = dout_i . out_i, one warp per row.
template <class T>
__global__ void attention_delta_kernel(const T* dout, HeadStrides dos, const T* out, HeadStrides os,
                                       compute_t<T>* delta, AttentionShape s) {
  const int64_t rows = s.batch * s.heads * s.tq;
  const int lane = threadIdx.x % 32;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; row < rows;
       row += static_cast<int64_t>(gridDim.x) * (blockDim.x / 32)) {
    const int64_t bh = row / s.tq, i = row % s.tq, b = bh / s.heads, h = bh % s.heads;
    const T* dor = dout + b * dos.b + h * dos.h + i * dos.t;
    const T* orow = out + head_offset(os, b, h, i);
    using C = compute_t<T>;
    C sum = 0;
    for (int64_t d = lane; d < s.dh; d += 32) sum += static_cast<C>(dor[d]) * static_cast<C>(orow[d]);
    sum = warp_sum(sum);
    if (lane == 0) delta[row] = sum;
  }
}

// One block per (batch, K/V head, tile of BK keys): dk and dv of those keys. The block's threads
// own key rows (RM each) and, of the transposed score tile, query columns (CN each).
template <class T, int D, int BQ, int BK, int kThreads>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dkdv_kernel(BackwardTensors<T> a, AttentionShape s, T scale) {
  using L = Layout<D, BK, BQ, kThreads>;
  constexpr int RM = L::RM, CN = L::CN, DN = L::DN, LD = L::LD, LS = L::LS, C = L::kCols;
  // sT: BK x LS, p^T and then ds^T of the current query tile; then lse and delta of its BQ rows.
  const auto [sK, sV, sQ, sdO, sT] = backward_tiles<T>(BK, BQ, LD);
  T* sLse = sT + BK * LS;
  T* sDelta = sLse + BQ;

  const KeyTile kt = key_tile<BK>(s);
  const int64_t b = kt.b, kvh = kt.kvh, k0 = kt.k0;
  const int rg = threadIdx.x / C, cg = threadIdx.x % C;
  load_head_tile<BK, D, kThreads>(sK, a.k, a.ks, b, kvh, k0, s.tk, s.dh);
  load_head_tile<BK, D, kThreads>(sV, a.v, a.vs, b, kvh, k0, s.tk, s.dh);

  T dk_acc[RM][DN] = {}, dv_acc[RM][DN] = {};

  const RowSpan rows = row_span<BK>(k0, s);
  const int64_t group = s.heads / s.kv_heads;
  for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
    for (int64_t q0 = (rows.first / BQ) * BQ; q0 <= rows.last; q0 += BQ) {
      __syncthreads();  // the previous tile's readers are done
      load_head_tile<BQ, D, kThreads>(sQ, a.q, a.qs, b, h, q0, s.tq, s.dh);
      load_head_tile<BQ, D, kThreads>(sdO, a.dout, a.dos, b, h, q0, s.tq, s.dh);
      for (int e = threadIdx.x; e < BQ; e += kThreads) {
        const RowStats<T> r = row_stats(a, s, b, h, q0 + e);
        sLse[e] = r.lse;
        sDelta[e] = r.delta;
      }
      __syncthreads();

      // Transposed tiles: st = k.q (scores), dpt = v.do, rows = keys, columns = queries.
      T st[RM][CN], dpt[RM][CN];
      paired_tile_products<T, RM, CN, C, D, LD>(sK, sV, sQ, sdO, rg, cg, st, dpt);
      for_tile<RM, CN>([&](int i, int j) {
        const int col = cg + C * j;
        const T p = recomputed_p(st[i][j], scale, sLse[col], q0 + col, k0 + rg * RM + i, s);
        dpt[i][j] = p * (dpt[i][j] - sDelta[col]);  // ds
        sT[(rg * RM + i) * LS + col] = p;
      });
      __syncthreads();
      accumulate_tile_product<L>(dv_acc, sT, sdO, rg, cg);  // dv += p^T do
      __syncthreads();
      for_tile<RM, CN>([&](int i, int j) { sT[(rg * RM + i) * LS + cg + C * j] = dpt[i][j]; });
      __syncthreads();
      accumulate_tile_product<L>(dk_acc, sT, sQ, rg, cg);  // dk += ds^T q (times scale, at the end)
    }
  }

  store_rows<L>(a.dk + head_offset(a.dks, b, kvh, 0), a.dks.t, k0, s.tk, s.dh, dk_acc, scale, rg, cg);
  store_rows<L>(a.dv + head_offset(a.dvs, b, kvh, 0), a.dvs.t, k0, s.tk, s.dh, dv_acc, T(1), rg, cg);
}

// One block per (batch, head, tile of BQ query rows): dq of those rows, streaming over the key
// tiles they see as the forward did.
template <class T, int D, int BQ, int BK, int kThreads>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dq_kernel(BackwardTensors<T> a, AttentionShape s, T scale) {
  using L = Layout<D, BQ, BK, kThreads>;
  constexpr int RM = L::RM, CN = L::CN, DN = L::DN, LD = L::LD, LS = L::LS, C = L::kCols;
  const auto [sQ, sdO, sK, sV, sS] = backward_tiles<T>(BQ, BK, LD);  // sS: BQ x LS, ds of the key tile

  const QueryTile t = query_tile<BQ>(s);
  const int64_t kvh = t.h / (s.heads / s.kv_heads);
  const int rg = threadIdx.x / C, cg = threadIdx.x % C;
  load_head_tile<BQ, D, kThreads>(sQ, a.q, a.qs, t.b, t.h, t.q0, s.tq, s.dh);
  load_head_tile<BQ, D, kThreads>(sdO, a.dout, a.dos, t.b, t.h, t.q0, s.tq, s.dh);
  T row_lse[RM], row_delta[RM], dq_acc[RM][DN] = {};
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const RowStats<T> r = row_stats(a, s, t.b, t.h, t.q0 + rg * RM + i);
    row_lse[i] = r.lse;
    row_delta[i] = r.delta;
  }

  const KeySpan span = key_span<BQ, BK>(t.q0, s);
  for (int64_t k0 = span.first; k0 <= span.last; k0 += BK) {
    load_key_tile<load_head_tile<BK, D, kThreads, T>>(sK, sV, a, t.b, kvh, k0, s);  // also frees sS

    T sc[RM][CN], dp[RM][CN];
    paired_tile_products<T, RM, CN, C, D, LD>(sQ, sdO, sK, sV, rg, cg, sc, dp);
    for_tile<RM, CN>([&](int i, int j) {
      const int col = cg + C * j;
      const T p = recomputed_p(sc[i][j], scale, row_lse[i], t.q0 + rg * RM + i, k0 + col, s);
      sS[(rg * RM + i) * LS + col] = p * (dp[i][j] - row_delta[i]);  // ds
    });
    __syncthreads();
    accumulate_tile_product<L>(dq_acc, sS, sK, rg, cg);  // dq += ds k (times scale, at the end)
  }

  store_rows<L>(a.dq + head_offset(a.dqs, t.b, t.h, 0), a.dqs.t, t.q0, s.tq, s.dh, dq_acc, scale, rg, cg);
}

// ---- host side ----

// Tile sizes per dtype: {BQ, BK, threads} of each kernel. float32 fits 64-row tiles of dh <= 128
// in at most 116 KB of shared memory; float64 takes 32-row tiles.
struct TileShape {
  int bq, bk, threads;
};
template <class T>
struct Tiling;
template <>
struct Tiling<float> {
  static constexpr TileShape forward{64, 64, 128}, dkdv{32, 64, 256}, dq{64, 32, 128};
};
template <>
struct Tiling<double> {
  static constexpr TileShape forward{32, 32, 128}, dkdv{32, 32, 128}, dq{32, 32, 128};
};

// q, k, v, dout with a contiguous last dim are read in place (any other strides); others are copied.
Tensor rows_readable(const Tensor& t) {
  return t.size(3) == 1 || t.stride(3) == 1 ? t : contiguous_copy(t);
}

HeadStrides head_strides(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

// float32 while TF32 is on runs the tensor-core kernels, when the build has them; bfloat16 always
// does (attention_tf32.cu: bfloat16 mma with float32 accumulation), and needs them.
bool on_tensor_cores(DType dtype) {
  if (dtype == kBFloat16)
    LINEA_CHECK(tf32_attention_available(), "attention",
                "bfloat16 runs on the tensor-core kernels, which this build's GPU code lacks (sm_80 or newer)");
  return (dtype == kBFloat16 || (dtype == kFloat32 && tf32_enabled())) && tf32_attention_available();
}

AttentionShape shape_of(const Tensor& q, const Tensor& k, int64_t window) {
  return {q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), window};
}

// One pass of attention (the forward, or the backward's kernels) over the tensors `a` of T, on the
// kernels that serve T: the tensor-core ones (attention_tf32.cu) where on_tensor_cores says so,
// bfloat16 always; else this file's exact kernels (float64, float32 with TF32 off), which
// simt.template operator()<D, Tiling<T>>() launches at the padded head dim D. The tiling comes as
// a template argument so that simt is never instantiated for bfloat16, which has none.
template <template <class> class Tensors, class T, class Simt>
void run_attention(const Tensors<T>& a, const AttentionShape& s, double scale, cudaStream_t stream, Simt&& simt) {
  if constexpr (!std::is_same_v<T, double>)
    if (on_tensor_cores(dtype_of<T>::value)) {
      attention_tf32(a, s, static_cast<float>(scale), stream);
      return;
    }
  if constexpr (!std::is_same_v<T, bfloat16>)
    with_head_dim(s.dh, [&]<int D>() { simt.template operator()<D, Tiling<T>>(); });
}

}  // namespace

void CudaBackend::attention(const Tensor& q_, const Tensor& k_, const Tensor& v_, double scale, int64_t window,
                            const Tensor& out, const Tensor& lse) const {
  check_on_device(device_, "attention", {&q_, &k_, &v_, &out, &lse});
  if (q_.numel() == 0) return;
  const cudaStream_t stream = use_device(device_);
  const Tensor q = rows_readable(q_), k = rows_readable(k_), v = rows_readable(v_);
  const AttentionShape s = shape_of(q, k, window);
  dispatch_floating_or_bf16(q.dtype(), "attention", [&]<class T>() {
    const ForwardTensors<T> a{q.data<T>(), k.data<T>(), v.data<T>(), head_strides(q), head_strides(k),
                              head_strides(v), out.data<T>(), lse.data<compute_t<T>>(), head_strides(out)};
    run_attention(a, s, scale, stream, [&]<int D, class Tiles>() {
      constexpr TileShape ts = Tiles::forward;
      const size_t bytes = sizeof(T) * ((ts.bq + 2 * ts.bk) * (D + 1) + ts.bq * (ts.bk + 1));
      launch_tiled(attention_forward_kernel<T, D, ts.bq, ts.bk, ts.threads>, s.batch * s.heads * ceil_div(s.tq, ts.bq),
                   ts.threads, bytes, stream, "attention", a, s, static_cast<T>(scale));
    });
  });
}

void CudaBackend::attention_backward(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& out_,
                                     const Tensor& lse_, const Tensor& dout_, double scale, int64_t window,
                                     const Tensor& dq, const Tensor& dk, const Tensor& dv) const {
  check_on_device(device_, "attention_backward", {&q_, &k_, &v_, &out_, &lse_, &dout_, &dq, &dk, &dv});
  if (q_.numel() == 0) {  // no query reads any key
    fill(dk, 0.0);
    fill(dv, 0.0);
    return;
  }
  const cudaStream_t stream = use_device(device_);
  const Tensor q = rows_readable(q_), k = rows_readable(k_), v = rows_readable(v_);
  const Tensor dout = rows_readable(dout_), out = rows_readable(out_), lse = contiguous_copy(lse_);
  const AttentionShape s = shape_of(q, k, window);
  dispatch_floating_or_bf16(q.dtype(), "attention_backward", [&]<class T>() {
    using C = compute_t<T>;  // lse and delta: float32 for bfloat16
    DeviceBuffer delta(sizeof(C) * s.batch * s.heads * s.tq, device_);
    attention_delta_kernel<T><<<row_blocks<32>(s.batch * s.heads * s.tq, device_), 256, 0, stream>>>(
        dout.data<T>(), head_strides(dout), out.data<T>(), head_strides(out), delta.as<C>(), s);
    LINEA_CUDA_LAUNCH_CHECK("attention_backward", "dout . out of ", dout.describe());
    const BackwardTensors<T> a{q.data<T>(), k.data<T>(), v.data<T>(), dout.data<T>(), lse.data<C>(), delta.as<C>(),
                               head_strides(q), head_strides(k), head_strides(v), head_strides(dout),
                               dq.data<T>(), dk.data<T>(), dv.data<T>(),
                               head_strides(dq), head_strides(dk), head_strides(dv)};
    run_attention(a, s, scale, stream, [&]<int D, class Tiles>() {
      constexpr TileShape kv = Tiles::dkdv;
      const size_t kv_bytes = sizeof(T) * (2 * (kv.bk + kv.bq) * (D + 1) + kv.bk * (kv.bq + 1) + 2 * kv.bq);
      launch_tiled(attention_backward_dkdv_kernel<T, D, kv.bq, kv.bk, kv.threads>,
                   s.batch * s.kv_heads * ceil_div(s.tk, kv.bk), kv.threads, kv_bytes, stream, "attention_backward", a,
                   s, static_cast<T>(scale));
      constexpr TileShape qt = Tiles::dq;
      const size_t q_bytes = sizeof(T) * (2 * (qt.bq + qt.bk) * (D + 1) + qt.bq * (qt.bk + 1));
      launch_tiled(attention_backward_dq_kernel<T, D, qt.bq, qt.bk, qt.threads>,
                   s.batch * s.heads * ceil_div(s.tq, qt.bq), qt.threads, q_bytes, stream, "attention_backward", a, s,
                   static_cast<T>(scale));
    });
  });
}

}  // namespace linea::cuda
