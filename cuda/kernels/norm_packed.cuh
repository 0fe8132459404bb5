#pragma once
// The norms' kernels for rows that fit a warp's registers (norm.cu picks them where they apply):
// a warp per row, each lane holding kPacks packs of the row (packs lane, lane + 32, ...), so x and
// dy are read from memory once, 16 bytes per load in float32 (8 in bfloat16, widened to float32
// as they load). On an H200, at a standard training
// step's (16k, 512) float32, the element-per-lane kernels ran the forward at 24 us and the backward
// at 40 us plus 26 us for the parameter gradients, which read x and dy a second time; the
// backward here forms dx and the parameter gradients' partial sums in one pass.
//
// Which columns a lane holds does not depend on the row, so a lane keeps the weight's packs and
// its columns' running sums of dy * xhat (and dy) in registers across the rows it visits. A block
// (kNormWarps warps) works on one chunk of consecutive rows, its warps taking every kNormWarps-th
// row; at the end the warps' sums are added in warp order through shared memory into the chunk's
// partial sums, which sum_chunks_kernel (norm.cu) then adds in chunk order. The chunking depends
// only on the shape: the same bits on every run, without atomics.
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "cuda/kernels/pack.cuh"
#include "cuda/kernels/rows.cuh"

namespace linea::cuda::norm_packed {

constexpr int kNormWarps = 8;
constexpr int kMaxPacks = 8;  // packs per lane: rows of up to 32 * 8 * kPack<C> elements (1024 float32)

// A lane's packs of one row, in the compute type C (zeros past the row's end, which add nothing
// to the sums): V = kPack<C> columns a pack, so a float32 row moves 16 bytes a load and a
// bfloat16 row 8, widened as it loads and rounded as it stores.
template <class C, int kPacks>
struct LaneRow {
  static constexpr int V = kPack<C>;
  Pack<C, V> p[kPacks];

  __device__ __forceinline__ static bool holds(int k, int packs) { return threadIdx.x % 32 + 32 * k < packs; }
  template <class S>
  __device__ __forceinline__ void load(const S* row, int packs) {
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if (holds(k, packs)) {
        const Pack<S, V> in = load_pack<S, V>(row + (threadIdx.x % 32 + 32 * k) * V);
#pragma unroll
        for (int e = 0; e < V; ++e) p[k].v[e] = static_cast<C>(in.v[e]);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) p[k].v[e] = C(0);
      }
    }
  }
  template <class S>
  __device__ __forceinline__ void store(S* row, int packs) const {
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
      if (holds(k, packs)) {
        Pack<S, V> out;
#pragma unroll
        for (int e = 0; e < V; ++e) out.v[e] = static_cast<S>(p[k].v[e]);
        store_pack<S, V>(row + (threadIdx.x % 32 + 32 * k) * V, out);
      }
  }
  __device__ __forceinline__ C sum() const {
    C s = 0;
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
#pragma unroll
      for (int e = 0; e < V; ++e) s += p[k].v[e];
    return s;
  }
};

// The start of an operand's rows and the size of its elements (a null pointer: the operand is
// absent).
struct Rows {
  const void* data;
  size_t element_size;
};

// Whether rows of `cols` elements at these addresses can be read as packs of kPack<C> elements
// (each operand's rows starting on a pack's bytes), and how many packs per lane then (1, 2, 4 or
// 8; 0: they cannot).
template <class C>
int packs_per_lane(int64_t cols, std::initializer_list<Rows> operands) {
  if (cols % kPack<C> != 0 || cols > int64_t{32} * kMaxPacks * kPack<C>) return 0;
  for (const Rows& o : operands)
    if (o.data && reinterpret_cast<uintptr_t>(o.data) % (o.element_size * kPack<C>) != 0) return 0;
  const int64_t needed = (cols / kPack<C> + 31) / 32;
  return needed <= 1 ? 1 : needed <= 2 ? 2 : needed <= 4 ? 4 : 8;
}

// Calls launch.template operator()<kPacks>() for packs = 1, 2, 4 or 8.
template <class Launch>
void with_packs(int packs, Launch&& launch) {
  switch (packs) {
    case 1: return launch.template operator()<1>();
    case 2: return launch.template operator()<2>();
    case 4: return launch.template operator()<4>();
    default: return launch.template operator()<8>();
  }
}

// y = (x - mu) * rstd * w + b (kRms: mu = 0, no b), mean and rstd stored per row; w, b may be null.
// The variance is summed around the mean (two passes over the registers, as norm.cu's kernels do
// over memory).
template <class X, class Y, int kPacks, bool kRms, class C = compute_t<X>>
__global__ void __launch_bounds__(32 * kNormWarps)
    norm_forward_kernel(const X* x, const C* w, const C* b, C eps, Y* y, C* mean, C* rstd, int64_t rows, int cols) {
  using Row = LaneRow<C, kPacks>;
  constexpr int V = Row::V;
  const int packs = cols / V;
  Row wr, br;
  if (w) wr.load(w, packs);
  if (b) br.load(b, packs);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kNormWarps + threadIdx.x / 32; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kNormWarps) {
    Row xr;
    xr.load(x + r * cols, packs);
    const C mu = kRms ? C(0) : warp_sum(xr.sum()) / static_cast<C>(cols);
    C sq = 0;
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
      if (Row::holds(k, packs))
#pragma unroll
        for (int e = 0; e < V; ++e) sq += (xr.p[k].v[e] - mu) * (xr.p[k].v[e] - mu);
    const C rs = C(1) / sqrt(warp_sum(sq) / static_cast<C>(cols) + eps);
    if (threadIdx.x % 32 == 0) {
      if (!kRms) mean[r] = mu;
      rstd[r] = rs;
    }
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
#pragma unroll
      for (int e = 0; e < V; ++e) {
        C v = (xr.p[k].v[e] - mu) * rs;
        if (w) v *= wr.p[k].v[e];
        if (b) v += br.p[k].v[e];
        xr.p[k].v[e] = v;
      }
    xr.store(y + r * cols, packs);
  }
}

// a + b rounded once and never fused with the product that made a: the bits of the separate
// addition of two gradients it replaces.
template <class T>
__device__ __forceinline__ T add_rounded(T a, T b) {
  if constexpr (std::is_same_v<T, double>) return __dadd_rn(a, b);
  else return __fadd_rn(a, b);
}

// Adds the block's warps' per-column sums (lane packs `acc`) in warp order into out[0..cols).
// `scratch` holds kNormWarps x cols elements. Every thread of the block must call it.
template <class T, int kPacks>
__device__ void add_warps_in_order(const LaneRow<T, kPacks>& acc, T* scratch, int cols, T* out) {
  constexpr int V = LaneRow<T, kPacks>::V;
  const int warp = threadIdx.x / 32;
  acc.store(scratch + warp * cols, cols / V);
  __syncthreads();
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    T total = 0;
#pragma unroll
    for (int k = 0; k < kNormWarps; ++k) total += scratch[k * cols + c];
    out[c] = total;
  }
  __syncthreads();  // before scratch is written again
}

// dx for rows [chunk * rows_per_chunk, ...) of block `chunk`, with g = dy * w and xhat = (x - mu) * rstd:
//   LayerNorm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat));  RMSNorm: no mean(g).
// partial_w[chunk * cols + c] = sum over the chunk's rows of dy * xhat, partial_b the same of dy
// (either may be null; RMSNorm has no bias). Dynamic shared memory: kNormWarps * cols elements
// when either is wanted. dx_add (may be null, else rows like dx): added to dx, x's gradient from
// its other consumers.
template <class X, class Y, int kPacks, bool kRms, class C = compute_t<X>>
__global__ void __launch_bounds__(32 * kNormWarps)
    norm_backward_kernel(const X* x, const C* w, const C* mean, const C* rstd, const Y* dy, X* dx, int64_t rows,
                         int cols, int64_t rows_per_chunk, C* partial_w, C* partial_b, const X* dx_add) {
  using Row = LaneRow<C, kPacks>;
  constexpr int V = Row::V;
  const int packs = cols / V;
  Row wr, acc_w{}, acc_b{};
  if (w) wr.load(w, packs);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * rows_per_chunk;
  const int64_t last = first + rows_per_chunk < rows ? first + rows_per_chunk : rows;
  for (int64_t r = first + threadIdx.x / 32; r < last; r += kNormWarps) {
    Row xr, gr;
    xr.load(x + r * cols, packs);
    gr.load(dy + r * cols, packs);
    const C mu = kRms ? C(0) : mean[r], rs = rstd[r];
    C sum_g = 0, sum_gx = 0;
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const C d = gr.p[k].v[e], xhat = (xr.p[k].v[e] - mu) * rs;
        const C g = w ? d * wr.p[k].v[e] : d;
        if (Row::holds(k, packs)) {  // past the row's end x - mu is not 0
          sum_g += g;
          sum_gx += g * xhat;
          acc_w.p[k].v[e] += d * xhat;
          if constexpr (!kRms) acc_b.p[k].v[e] += d;
        }
        xr.p[k].v[e] = xhat;
        gr.p[k].v[e] = g;
      }
    const C mean_g = kRms ? C(0) : warp_sum(sum_g) / static_cast<C>(cols);
    const C mean_gx = warp_sum(sum_gx) / static_cast<C>(cols);
#pragma unroll
    for (int k = 0; k < kPacks; ++k)
#pragma unroll
      for (int e = 0; e < V; ++e) gr.p[k].v[e] = rs * (gr.p[k].v[e] - mean_g - xr.p[k].v[e] * mean_gx);
    if (dx_add) {
      xr.load(dx_add + r * cols, packs);  // x is done with
      // dx as the norm alone stores it (rounded to X), then the addition rounded again: the bits of
      // the separate addition.
#pragma unroll
      for (int k = 0; k < kPacks; ++k)
#pragma unroll
        for (int e = 0; e < V; ++e)
          gr.p[k].v[e] = add_rounded(static_cast<C>(static_cast<X>(gr.p[k].v[e])), xr.p[k].v[e]);
    }
    gr.store(dx + r * cols, packs);
  }
  if (!partial_w && !partial_b) return;  // uniform across the block
  extern __shared__ __align__(16) unsigned char scratch_bytes[];
  C* scratch = reinterpret_cast<C*>(scratch_bytes);
  if (partial_w) add_warps_in_order(acc_w, scratch, cols, partial_w + blockIdx.x * static_cast<int64_t>(cols));
  if (partial_b) add_warps_in_order(acc_b, scratch, cols, partial_b + blockIdx.x * static_cast<int64_t>(cols));
}

}  // namespace linea::cuda::norm_packed
