#pragma once
// What the two families of attention kernels share: the exact float32/float64 kernels of
// attention.cu (plain fused multiply-adds) and the TF32 tensor-core kernels of attention_tf32.cu.
// Both tile the (query, key) plane the same way: which keys a query row sees (causal mask and
// optional sliding window, with fewer queries than keys when decoding), which key tiles a query
// tile must visit, and the order of blocks in the grid.
#include <cstdint>
#include <utility>

#include "cuda/launch.cuh"
#include "tensor/dtype.h"

namespace linea::cuda::attention_tiles {

// Element strides of the batch, head and position dims of a (B, heads, T, dh) tensor whose last
// dim is contiguous.
struct HeadStrides {
  int64_t b, h, t;
};

// Offset of row t of head h of batch b.
__host__ __device__ __forceinline__ int64_t head_offset(const HeadStrides& s, int64_t b, int64_t h, int64_t t) {
  return b * s.b + h * s.h + t * s.t;
}

struct AttentionShape {
  int64_t batch, heads, kv_heads, tq, tk, dh, window;
};

// Whether query row i (position tk - tq + i) sees key position s.
__device__ __forceinline__ bool visible(int64_t row, int64_t key, const AttentionShape& s) {
  const int64_t position = s.tk - s.tq + row;
  return row < s.tq && key <= position && (s.window == 0 || key > position - s.window);
}

// Whether every (row, key) of the rows [q0, q0 + rows) and keys [k0, k0 + keys) is visible: such
// tiles skip the elementwise mask.
__device__ __forceinline__ bool tile_fully_visible(int64_t q0, int rows, int64_t k0, int keys, const AttentionShape& s) {
  const int64_t offset = s.tk - s.tq;
  return q0 + rows <= s.tq && k0 + keys <= s.tk && k0 + keys - 1 <= offset + q0 &&
         (s.window == 0 || k0 > offset + q0 + rows - 1 - s.window);
}

// The key range [first tile start, last key] the query rows [q0, q0 + kRows) can see.
struct KeySpan {
  int64_t first, last;
};
template <int kRows, int kKeys>
__device__ __forceinline__ KeySpan key_span(int64_t q0, const AttentionShape& s) {
  const int64_t offset = s.tk - s.tq;
  const int64_t last_row = (q0 + kRows < s.tq ? q0 + kRows : s.tq) - 1;
  int64_t first = s.window > 0 ? offset + q0 - s.window + 1 : 0;
  if (first < 0) first = 0;
  return {(first / kKeys) * kKeys, offset + last_row};
}

// The query rows [first, last] that see some key of [k0, k0 + kKeys): row >= key - offset
// (causal) and, with a window, row < key - offset + window.
struct RowSpan {
  int64_t first, last;
};
template <int kKeys>
__device__ __forceinline__ RowSpan row_span(int64_t k0, const AttentionShape& s) {
  const int64_t offset = s.tk - s.tq;
  const int64_t last_key = (k0 + kKeys < s.tk ? k0 + kKeys : s.tk) - 1;
  const int64_t first = k0 - offset > 0 ? k0 - offset : 0;
  int64_t last = s.tq - 1;
  if (s.window > 0 && last_key - offset + s.window - 1 < last) last = last_key - offset + s.window - 1;
  return {first, last};
}

// Block -> (batch, head, query tile), the tiles with the most keys (the last ones) first so that
// the long blocks do not end up alone at the tail of the grid.
struct QueryTile {
  int64_t b, h, q0;
};
template <int kRows>
__device__ __forceinline__ QueryTile query_tile(const AttentionShape& s) {
  const int64_t heads = s.batch * s.heads, tiles = (s.tq + kRows - 1) / kRows;
  const int64_t bh = blockIdx.x % heads, tile = tiles - 1 - blockIdx.x / heads;
  return {bh / s.heads, bh % s.heads, tile * kRows};
}

// Block -> (batch, K/V head, key tile), for the kernels that own a tile of keys.
struct KeyTile {
  int64_t b, kvh, k0;
};
template <int kKeys>
__device__ __forceinline__ KeyTile key_tile(const AttentionShape& s) {
  const int64_t pairs = s.batch * s.kv_heads;
  return {(blockIdx.x % pairs) / s.kv_heads, blockIdx.x % pairs % s.kv_heads,
          static_cast<int64_t>(blockIdx.x / pairs) * kKeys};
}

// Calls f.template operator()<D>() with the padded head dim for dh.
template <class F>
void with_head_dim(int64_t dh, F&& f) {
  if (dh <= 32) f.template operator()<32>();
  else if (dh <= 64) f.template operator()<64>();
  else if (dh <= 128) f.template operator()<128>();
  else fail("attention", "the CUDA kernel supports head dims up to 128, got ", dh);
}

// The key tile at k0 of K/V head kvh of batch b into sK and sV, for the kernels that stream key
// tiles (forward, dq), once every thread is done with the previous tile (and with whatever the
// kernel computed from it). kLoadHeadTile is the family's loader of a tile of a head's rows, with
// the tile's size in its template arguments: load_head_tile of attention.cu (padded rows for the
// SIMT kernels) or of attention_tf32.cu (tensor-core tiles).
template <auto kLoadHeadTile, class Smem, class Tensors>
__device__ __forceinline__ void load_key_tile(Smem* sK, Smem* sV, const Tensors& a, int64_t b, int64_t kvh, int64_t k0,
                                              const AttentionShape& s) {
  __syncthreads();
  kLoadHeadTile(sK, a.k, a.ks, b, kvh, k0, s.tk, s.dh);
  kLoadHeadTile(sV, a.v, a.vs, b, kvh, k0, s.tk, s.dh);
  __syncthreads();
}

// A grid of `blocks` tiles (cuda/launch.cuh: launch_kernel).
template <class... KernelArgs, class... Args>
void launch_tiled(void (*kernel)(KernelArgs...), int64_t blocks, int threads, size_t bytes, cudaStream_t stream,
                  const char* op, Args&&... args) {
  launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), threads, bytes, stream, op, std::forward<Args>(args)...);
}

// The tensors of one attention call, as the kernels of both families take them: q, k, v, dout,
// out, dq, dk and dv have a contiguous last dim (any other strides); lse and delta are contiguous,
// in compute_t<T> (float32 for bfloat16 activations).
template <class T>
struct ForwardTensors {
  const T *q, *k, *v;
  HeadStrides qs, ks, vs;
  T* out;
  compute_t<T>* lse;
  HeadStrides os;
};
template <class T>
struct BackwardTensors {
  const T *q, *k, *v, *dout;
  const compute_t<T> *lse, *delta;
  HeadStrides qs, ks, vs, dos;
  T *dq, *dk, *dv;
  HeadStrides dqs, dks, dvs;
};

// What the forward saved of query row `row` of head h of batch b, which backward reads: its
// logsumexp and D = do . o; zeros for the rows past tq that pad a tile.
template <class C>
struct RowStats {
  C lse, delta;
};
template <class T, class C = compute_t<T>>
__device__ __forceinline__ RowStats<C> row_stats(const BackwardTensors<T>& a, const AttentionShape& s, int64_t b,
                                                 int64_t h, int64_t row) {
  if (row >= s.tq) return {C(0), C(0)};
  const int64_t at = (b * s.heads + h) * s.tq + row;
  return {a.lse[at], a.delta[at]};
}

// A backward block's shared memory (the kernel's dynamic shared memory), in order: the two tiles
// of the rows the block owns (keys and values for dk and dv, queries and dout for dq; `own_rows`
// each), the two tiles of the rows it streams over (`streamed_rows` each), all rows `pitch`
// elements apart, then `rest`: whatever the kernel keeps after them (a score tile, the statistics
// of the streamed rows).
template <class T>
struct BackwardTiles {
  T *own_a, *own_b, *streamed_a, *streamed_b, *rest;
};
template <class T>
__device__ __forceinline__ BackwardTiles<T> backward_tiles(int own_rows, int streamed_rows, int pitch) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* own_a = reinterpret_cast<T*>(smem);
  T* own_b = own_a + own_rows * pitch;
  T* streamed_a = own_b + own_rows * pitch;
  T* streamed_b = streamed_a + streamed_rows * pitch;
  return {own_a, own_b, streamed_a, streamed_b, streamed_b + streamed_rows * pitch};
}

// The TF32 tensor-core kernels (attention_tf32.cu), for float32 while TF32 is on and for
// bfloat16 always, when the build has them (sm_80 or newer). One name for the forward and the
// backward (told apart by their tensors), so that attention.cu picks the kernels of both passes
// with one helper (run_attention).
bool tf32_attention_available();
void attention_tf32(const ForwardTensors<float>& a, const AttentionShape& s, float scale, cudaStream_t stream);
void attention_tf32(const ForwardTensors<bfloat16>& a, const AttentionShape& s, float scale, cudaStream_t stream);
void attention_tf32(const BackwardTensors<float>& a, const AttentionShape& s, float scale, cudaStream_t stream);
void attention_tf32(const BackwardTensors<bfloat16>& a, const AttentionShape& s, float scale, cudaStream_t stream);

}  // namespace linea::cuda::attention_tiles
