// The gated linear attention recurrence (tensor/backend.h: gated_scan) step by step: the CUDA
// backend's ScanAlgorithm::Sequential, kept as an option and as a second oracle of the chunked
// tensor-core kernels (chunked_scan.cu, the default), which CudaBackend::gated_scan at the end of
// this file dispatches to. Tested against the CPU kernel (cpu/gated_scan.cpp). Per sequence (batch element and head) with Dv_t = diag(exp(gv_t)),
// Dk_t = diag(exp(gk_t)):  S_t = Dv_t S_{t-1} Dk_t + v_t k_t^T,  o_t = S_t q_t.
//
// Work split. Row i of S evolves on its own: S_t[i, :] = ev_t[i] (S_{t-1}[i, :] * ek_t) + v_t[i] k_t,
// and o_t[i] = S_t[i, :] . q_t reads only that row. So a block owns a slice of the dv rows of one
// sequence (grid: sequences x slices; several slices per sequence when there are few sequences,
// so that every SM has work) and walks time sequentially. Each warp holds up to kRowsPerWarp rows
// in registers, its 32 lanes splitting the key dim (CK = ceil(dk / 32) columns per lane, dk padded
// with zeros to DK = 32 CK); a row's dot product is a warp reduction. The block stages kTile steps
// of q, k, exp(gk), v, exp(gv) in shared memory at a time, so the sequential loop does not wait
// on global memory at every step.
//
// Backward (the formulas are in tensor/backend.h). G_t = dL/dS_t is row-local too, and so are
// dv_t[i] = G_t[i, :] . k_t, dgv_t[i] and d initial_state; but dq_t = S_t^T do_t, dk_t = G_t^T v_t
// and dgk_t sum over rows, so over the block's warps (through shared memory, in warp order) and
// then over the row slices: each slice writes its partial sums and a second small kernel adds them
// in slice order. No atomics anywhere, so every run gives the same bits. The states are recomputed
// going backwards: a forward pass keeps S at every `chunk`-th step (checkpoints), then for each
// chunk, last first, the chunk's states are recomputed from its checkpoint and the chunk is swept
// in reverse. chunk ~ sqrt(T), so the scratch is O(sqrt(T) dv dk) per sequence; every lane reads
// back only the scratch values it wrote itself, so the scratch needs no synchronisation.
//
// Arithmetic in the element type (float32 states accumulate in float32, float64 in float64).
#include <algorithm>
#include <cmath>
#include <memory>

#include "cuda/buffer.h"
#include "cuda/cuda_backend.h"
#include "cuda/kernels/gated_scan.h"
#include "tensor/widen.h"
#include "cuda/kernels/rows.cuh"
#include "tensor/contiguous_outputs.h"

namespace linea::cuda {

namespace {

constexpr int kWarps = 8;                              // warps per block
constexpr int kBlockThreads = 32 * kWarps;
constexpr int kRowsPerWarp = 4;                        // most rows of S one warp holds in registers
constexpr int kMaxBlockRows = kWarps * kRowsPerWarp;  // most rows of S one block owns
constexpr int kTile = 8;                               // steps staged in shared memory at once
constexpr int kMaxBackwardSlices = 4;                  // bounds the partial sums' memory (3 x slices x |q|)

struct ScanShape {
  int64_t sequences;           // B * H
  int64_t steps, dk, dv;       // T, and the state's dims
  int64_t gk_width, gv_width;  // 0: no decay on that side; 1: one per step; dk / dv: per channel
  int64_t block_rows;          // rows of S per block: block (x, y) owns rows [y block_rows, ...)
  int rows_per_warp;           // <= kRowsPerWarp; warp w holds local rows w, w + kWarps, ...
  int64_t chunk;               // backward: steps between checkpoints, a multiple of kTile
};

// The r-th local row of this warp, and whether it is one of S's rows (a warp-uniform condition, so
// whole warps skip together and their shuffles stay complete).
__device__ __forceinline__ int local_row(int r) { return static_cast<int>(threadIdx.x / 32) + kWarps * r; }
__device__ __forceinline__ bool holds_row(int r, const ScanShape& s) {
  const int l = local_row(r);
  return r < s.rows_per_warp && l < s.block_rows && blockIdx.y * s.block_rows + l < s.dv;
}

// Steps [t0, t0 + n) of q (when sq is not null), k and exp(gk) into kTile x DK shared tiles:
// zeros past dk (and past n), and a decay factor of 1 where there is no decay.
template <class T, int DK>
__device__ void load_key_side(T* sq, T* sk, T* sek, const T* q, const T* k, const T* gk, const ScanShape& s,
                              int64_t seq, int64_t t0, int n) {
  for (int e = threadIdx.x; e < kTile * DK; e += kBlockThreads) {
    const int st = e / DK, j = e % DK;
    const bool in = st < n && j < s.dk;
    const int64_t t = t0 + st, at = (seq * s.steps + t) * s.dk + j;
    if (sq != nullptr) sq[e] = in ? q[at] : T(0);
    sk[e] = in ? k[at] : T(0);
    T factor = T(1);
    if (in && gk != nullptr) factor = exp(gk[(seq * s.steps + t) * s.gk_width + (s.gk_width == 1 ? 0 : j)]);
    sek[e] = factor;
  }
}

// The same for the block's rows of v, exp(gv) and (when sdo is not null) dout: kTile x
// kMaxBlockRows tiles.
template <class T>
__device__ void load_value_side(T* sv, T* sev, T* sdo, const T* v, const T* gv, const T* dout, const ScanShape& s,
                                int64_t seq, int64_t t0, int n) {
  const int64_t row0 = blockIdx.y * s.block_rows;
  for (int e = threadIdx.x; e < kTile * kMaxBlockRows; e += kBlockThreads) {
    const int st = e / kMaxBlockRows, l = e % kMaxBlockRows;
    const int64_t t = t0 + st, i = row0 + l;
    const bool in = st < n && l < s.block_rows && i < s.dv;
    const int64_t at = (seq * s.steps + t) * s.dv + i;
    sv[e] = in ? v[at] : T(0);
    T factor = T(1);
    if (in && gv != nullptr) factor = exp(gv[(seq * s.steps + t) * s.gv_width + (s.gv_width == 1 ? 0 : i)]);
    sev[e] = factor;
    if (sdo != nullptr) sdo[e] = in ? dout[at] : T(0);
  }
}

// Calls f(r, c, in, at) for each register x[r][c] of the block's rows of a (sequences, dv, dk)
// tensor: `at` is the element's offset, `in` whether it exists (a row past dv or a column past dk
// does not).
template <int CK, class F>
__device__ __forceinline__ void for_each_row_element(const ScanShape& s, int64_t seq, F&& f) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = blockIdx.y * s.block_rows + local_row(r);
#pragma unroll
    for (int c = 0; c < CK; ++c) {
      const int64_t j = lane + 32 * c;
      f(r, c, holds_row(r, s) && j < s.dk, (seq * s.dv + i) * s.dk + j);
    }
  }
}

// The block's rows of a (sequences, dv, dk) tensor into registers (zeros where src is null), and back.
template <class T, int CK>
__device__ void load_rows(T (&x)[kRowsPerWarp][CK], const T* src, const ScanShape& s, int64_t seq) {
  for_each_row_element<CK>(s, seq, [&](int r, int c, bool in, int64_t at) {
    x[r][c] = src != nullptr && in ? src[at] : T(0);
  });
}
template <class T, int CK>
__device__ void store_rows(const T (&x)[kRowsPerWarp][CK], T* dst, const ScanShape& s, int64_t seq) {
  for_each_row_element<CK>(s, seq, [&](int r, int c, bool in, int64_t at) {
    if (in) dst[at] = x[r][c];
  });
}

// One saved state of this block in the backward's scratch: each lane's own values, laid out so
// that a warp's accesses are contiguous.
template <int CK>
__device__ __forceinline__ int64_t slot_offset(int64_t slot, int r, int c, const ScanShape& s) {
  constexpr int DK = 32 * CK;
  return ((slot * s.rows_per_warp + r) * kWarps + threadIdx.x / 32) * DK + threadIdx.x % 32 + 32 * c;
}
template <class T, int CK>
__device__ void save_state(const T (&x)[kRowsPerWarp][CK], T* scratch, int64_t slot, const ScanShape& s) {
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
    if (r < s.rows_per_warp)
#pragma unroll
      for (int c = 0; c < CK; ++c) scratch[slot_offset<CK>(slot, r, c, s)] = x[r][c];
}
template <class T, int CK>
__device__ void restore_state(T (&x)[kRowsPerWarp][CK], const T* scratch, int64_t slot, const ScanShape& s) {
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int c = 0; c < CK; ++c) x[r][c] = r < s.rows_per_warp ? scratch[slot_offset<CK>(slot, r, c, s)] : T(0);
}

// S_t = Dv_t S_{t-1} Dk_t + v_t k_t^T for the staged step st, on this warp's rows.
template <class T, int CK>
__device__ __forceinline__ void step_rows(T (&S)[kRowsPerWarp][CK], const T* sk, const T* sek, const T* sv,
                                          const T* sev, int st, const ScanShape& s) {
  constexpr int DK = 32 * CK;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    if (!holds_row(r, s)) continue;
    const int l = local_row(r);
    const T a = sev[st * kMaxBlockRows + l], b = sv[st * kMaxBlockRows + l];
#pragma unroll
    for (int c = 0; c < CK; ++c) {
      const int j = lane + 32 * c;
      S[r][c] = S[r][c] * (a * sek[st * DK + j]) + b * sk[st * DK + j];
    }
  }
}

// The shared memory of the tiles: q, k, exp(gk) (kTile x DK each) and, per block row, v, exp(gv)
// and one more (o in the forward, dout in the backward), then the backward's extras.
template <class T, int DK>
struct Tiles {
  T *q, *k, *ek, *v, *ev, *extra;
  __device__ explicit Tiles(T* base)
      : q(base),
        k(q + kTile * DK),
        ek(k + kTile * DK),
        v(ek + kTile * DK),
        ev(v + kTile * kMaxBlockRows),
        extra(ev + kTile * kMaxBlockRows) {}
  __device__ T* end() const { return extra + kTile * kMaxBlockRows; }
  static constexpr size_t elements = 3 * kTile * DK + 3 * kTile * kMaxBlockRows;
};

template <class T, int CK>
__global__ void __launch_bounds__(kBlockThreads)
    gated_scan_forward_kernel(const T* q, const T* k, const T* v, const T* gk, const T* gv, const T* s0, T* out,
                              T* final_state, ScanShape s) {
  constexpr int DK = 32 * CK;
  extern __shared__ __align__(16) unsigned char smem[];
  const Tiles<T, DK> tile(reinterpret_cast<T*>(smem));
  T* so = tile.extra;  // the tile's outputs, written out together
  const int64_t seq = blockIdx.x, row0 = blockIdx.y * s.block_rows;
  const int lane = threadIdx.x % 32;

  T S[kRowsPerWarp][CK];
  load_rows(S, s0, s, seq);
  for (int64_t t0 = 0; t0 < s.steps; t0 += kTile) {
    const int n = static_cast<int>(s.steps - t0 < kTile ? s.steps - t0 : kTile);
    __syncthreads();  // the previous tile is written out
    load_key_side<T, DK>(tile.q, tile.k, tile.ek, q, k, gk, s, seq, t0, n);
    load_value_side<T>(tile.v, tile.ev, nullptr, v, gv, nullptr, s, seq, t0, n);
    __syncthreads();
    for (int st = 0; st < n; ++st) {
      step_rows(S, tile.k, tile.ek, tile.v, tile.ev, st, s);
      // o_t[i] = S_t[i, :] . q_t
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        if (!holds_row(r, s)) continue;
        T part = 0;
#pragma unroll
        for (int c = 0; c < CK; ++c) part += S[r][c] * tile.q[st * DK + lane + 32 * c];
        part = warp_sum(part);
        if (lane == 0) so[st * kMaxBlockRows + local_row(r)] = part;
      }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n * kMaxBlockRows; e += kBlockThreads) {
      const int st = e / kMaxBlockRows, l = e % kMaxBlockRows;
      if (l < s.block_rows && row0 + l < s.dv) out[(seq * s.steps + t0 + st) * s.dv + row0 + l] = so[e];
    }
  }
  if (final_state != nullptr) store_rows(S, final_state, s, seq);
}

// Runs steps [t_begin, t_end) on S (staging k, exp(gk), v, exp(gv)); when `keep` is not null the
// state after step t goes to scratch slot keep_slot0 + (t - t_begin).
template <class T, int CK>
__device__ void advance(T (&S)[kRowsPerWarp][CK], const Tiles<T, 32 * CK>& tile, const T* k, const T* v,
                        const T* gk, const T* gv, const ScanShape& s, int64_t seq, int64_t t_begin, int64_t t_end,
                        T* keep, int64_t keep_slot0) {
  constexpr int DK = 32 * CK;
  for (int64_t t0 = t_begin; t0 < t_end; t0 += kTile) {
    const int n = static_cast<int>(t_end - t0 < kTile ? t_end - t0 : kTile);
    __syncthreads();
    load_key_side<T, DK>(nullptr, tile.k, tile.ek, nullptr, k, gk, s, seq, t0, n);
    load_value_side<T>(tile.v, tile.ev, nullptr, v, gv, nullptr, s, seq, t0, n);
    __syncthreads();
    for (int st = 0; st < n; ++st) {
      step_rows(S, tile.k, tile.ek, tile.v, tile.ev, st, s);
      if (keep != nullptr) save_state(S, keep, keep_slot0 + (t0 + st - t_begin), s);
    }
  }
}

// dq, dk, dgk (sequences, steps, dk) partial sums of this block's row slice go to slice y of the
// `parts` arrays (any may be null: not wanted); dv, dgv (sequences, steps, dv) and dinitial
// (sequences, dv, dk) are row-local and written directly (null: not wanted; dgv is per channel
// here, summed over channels afterwards for a scalar decay). scratch holds this block's
// checkpoints (slots 0 .. n_chunks-1) and one chunk's states (the next `chunk` slots).
template <class T, int CK>
__global__ void __launch_bounds__(kBlockThreads)
    gated_scan_backward_kernel(const T* q, const T* k, const T* v, const T* gk, const T* gv, const T* s0,
                               const T* dout, const T* dfinal, T* dq_parts, T* dk_parts, T* dgk_parts, T* dv,
                               T* dgv, T* dinitial, T* scratch, ScanShape s) {
  constexpr int DK = 32 * CK;
  extern __shared__ __align__(16) unsigned char smem[];
  const Tiles<T, DK> tile(reinterpret_cast<T*>(smem));
  T* sdo = tile.extra;
  T* sdv = tile.end();                      // kTile x kMaxBlockRows: dv of the tile's steps
  T* sdgv = sdv + kTile * kMaxBlockRows;    // and dgv
  T* sred = sdgv + kTile * kMaxBlockRows;   // 2 buffers x 3 sums x kWarps x DK: per-warp partials
  const int64_t seq = blockIdx.x, row0 = blockIdx.y * s.block_rows;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n_chunks = (s.steps + s.chunk - 1) / s.chunk;
  const int64_t slot_elements = static_cast<int64_t>(s.rows_per_warp) * kWarps * DK;
  scratch += (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x) * (n_chunks + s.chunk) * slot_elements;
  T* chunk_states = scratch + n_chunks * slot_elements;
  const bool need_gp = dgk_parts != nullptr || dgv != nullptr;  // the terms G_t * P_t

  // The forward again, keeping the state before each chunk.
  T S[kRowsPerWarp][CK];
  load_rows(S, s0, s, seq);
  for (int64_t n = 0; n < n_chunks; ++n) {
    save_state(S, scratch, n, s);
    if (n + 1 < n_chunks) advance<T, CK>(S, tile, k, v, gk, gv, s, seq, n * s.chunk, (n + 1) * s.chunk, nullptr, 0);
  }

  T G[kRowsPerWarp][CK];  // G_{t+1} decayed to step t, becoming G_t as do_t q_t^T is added
  load_rows(G, dfinal, s, seq);
  for (int64_t n = n_chunks - 1; n >= 0; --n) {
    const int64_t t_begin = n * s.chunk, t_end = t_begin + s.chunk < s.steps ? t_begin + s.chunk : s.steps;
    restore_state(S, scratch, n, s);
    advance<T, CK>(S, tile, k, v, gk, gv, s, seq, t_begin, t_end, chunk_states, 0);
    for (int64_t t0 = t_begin + (t_end - 1 - t_begin) / kTile * kTile; t0 >= t_begin; t0 -= kTile) {
      const int n_steps = static_cast<int>(t_end - t0 < kTile ? t_end - t0 : kTile);
      __syncthreads();  // the previous tile's dv, dgv are written out
      load_key_side<T, DK>(tile.q, tile.k, tile.ek, q, k, gk, s, seq, t0, n_steps);
      load_value_side<T>(tile.v, tile.ev, sdo, v, gv, dout, s, seq, t0, n_steps);
      __syncthreads();
      for (int st = n_steps - 1; st >= 0; --st) {
        const int64_t t = t0 + st, slot = t - t_begin;
        T dq_acc[CK], dk_acc[CK], dgk_acc[CK];
#pragma unroll
        for (int c = 0; c < CK; ++c) dq_acc[c] = dk_acc[c] = dgk_acc[c] = 0;
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          if (!holds_row(r, s)) continue;
          const int l = local_row(r);
          const T a = tile.ev[st * kMaxBlockRows + l], v_i = tile.v[st * kMaxBlockRows + l];
          const T do_i = sdo[st * kMaxBlockRows + l];
          T dv_part = 0, gp_part = 0;
#pragma unroll
          for (int c = 0; c < CK; ++c) {
            const int j = lane + 32 * c;
            const T S_t = chunk_states[slot_offset<CK>(slot, r, c, s)];
            G[r][c] += do_i * tile.q[st * DK + j];
            dq_acc[c] += S_t * do_i;
            dk_acc[c] += G[r][c] * v_i;
            dv_part += G[r][c] * tile.k[st * DK + j];
            // Dv_t G_t Dk_t: what reaches S_{t-1}; with S_{t-1} it gives G_t * P_t.
            G[r][c] *= a * tile.ek[st * DK + j];
            if (need_gp) {
              const T S_prev = slot > 0 ? chunk_states[slot_offset<CK>(slot - 1, r, c, s)]
                                        : scratch[slot_offset<CK>(n, r, c, s)];
              const T gp = G[r][c] * S_prev;
              gp_part += gp;
              dgk_acc[c] += gp;
            }
          }
          dv_part = warp_sum(dv_part);
          gp_part = warp_sum(gp_part);
          if (lane == 0) {
            sdv[st * kMaxBlockRows + l] = dv_part;
            sdgv[st * kMaxBlockRows + l] = gp_part;
          }
        }
        // Sum the warps' column partials in warp order. Two buffers, alternating by step: a warp
        // writing one has passed the barrier that every reader of its previous use reached after
        // reading.
        T* red = sred + (t & 1) * 3 * kWarps * DK;
#pragma unroll
        for (int c = 0; c < CK; ++c) {
          red[(0 * kWarps + warp) * DK + lane + 32 * c] = dq_acc[c];
          red[(1 * kWarps + warp) * DK + lane + 32 * c] = dk_acc[c];
          red[(2 * kWarps + warp) * DK + lane + 32 * c] = dgk_acc[c];
        }
        __syncthreads();
        for (int e = threadIdx.x; e < 3 * DK; e += kBlockThreads) {
          const int which = e / DK, j = e % DK;
          T* parts = which == 0 ? dq_parts : which == 1 ? dk_parts : dgk_parts;
          if (parts == nullptr || j >= s.dk) continue;
          T sum = 0;
          for (int w = 0; w < kWarps; ++w) sum += red[(which * kWarps + w) * DK + j];
          parts[((blockIdx.y * s.sequences + seq) * s.steps + t) * s.dk + j] = sum;
        }
      }
      __syncthreads();
      for (int e = threadIdx.x; e < n_steps * kMaxBlockRows; e += kBlockThreads) {
        const int st = e / kMaxBlockRows, l = e % kMaxBlockRows;
        if (l >= s.block_rows || row0 + l >= s.dv) continue;
        const int64_t at = (seq * s.steps + t0 + st) * s.dv + row0 + l;
        if (dv != nullptr) dv[at] = sdv[e];
        if (dgv != nullptr) dgv[at] = sdgv[e];
      }
    }
  }
  // After step 1, G holds Dv_1 G_1 Dk_1 = dL/dS_0.
  if (dinitial != nullptr) store_rows(G, dinitial, s, seq);
}

// out[row, j] = sum over slices of parts[slice, row, j], or with `over_width` out[row] = the sum
// over slices and j: in a fixed order, so deterministic.
template <class T>
__global__ void sum_parts_kernel(const T* parts, int64_t slices, int64_t rows, int64_t width, bool over_width,
                                 T* out) {
  const int64_t n = over_width ? rows : rows * width;
  LINEA_GRID_STRIDE_LOOP(e, n) {
    T sum = 0;
    for (int64_t p = 0; p < slices; ++p) {
      if (over_width)
        for (int64_t j = 0; j < width; ++j) sum += parts[(p * rows + e) * width + j];
      else
        sum += parts[p * rows * width + e];
    }
    out[e] = sum;
  }
}

// ---- host side ----

// Calls f.template operator()<CK>() with the columns per lane for dk.
template <class F>
void with_key_dim(int64_t dk, const char* op, F&& f) {
  if (dk <= 32) f.template operator()<1>();
  else if (dk <= 64) f.template operator()<2>();
  else if (dk <= 128) f.template operator()<4>();
  else if (dk <= 256) f.template operator()<8>();
  else fail(op, "the CUDA kernel supports key dims up to 256, got dk = ", dk);
}

// Cuts the dv rows into slices, one block each: enough blocks for about two per SM, at least one
// row per warp, at most kMaxBlockRows per block, and at most max_slices unless dv needs more.
void plan_rows(ScanShape& s, int device, int64_t max_slices) {
  const int64_t least = ceil_div(s.dv, kMaxBlockRows);
  const int64_t most = std::max(least, std::min(ceil_div(s.dv, kWarps), max_slices));
  const int64_t want = ceil_div(2 * static_cast<int64_t>(sm_count(device)), s.sequences);
  const int64_t slices = std::clamp(want, least, most);
  s.block_rows = ceil_div(s.dv, slices);
  s.rows_per_warp = static_cast<int>(ceil_div(s.block_rows, kWarps));
}
int64_t slices_of(const ScanShape& s) { return ceil_div(s.dv, s.block_rows); }

ScanShape shape_of(const Tensor& q, const Tensor& v, const Tensor& gk, const Tensor& gv) {
  ScanShape s{};
  s.sequences = q.size(0) * q.size(1);
  s.steps = q.size(2);
  s.dk = q.size(3);
  s.dv = v.size(3);
  s.gk_width = gk.defined() ? gk.size(3) : 0;
  s.gv_width = gv.defined() ? gv.size(3) : 0;
  return s;
}

Tensor contiguous_or_undefined(const Tensor& t) { return t.defined() ? contiguous_copy(t) : t; }

// A scratch buffer of n elements of T, or none for n = 0.
template <class T>
std::unique_ptr<DeviceBuffer> scratch_of(int64_t n, int device) {
  return n > 0 ? std::make_unique<DeviceBuffer>(sizeof(T) * static_cast<size_t>(n), device) : nullptr;
}

// The sequential kernels write contiguous outputs.
void sequential_forward(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& gk_, const Tensor& gv_,
                        const Tensor& s0_, const Tensor& out, const Tensor& final_state, int device_,
                        cudaStream_t stream) {
  const Tensor q = contiguous_copy(q_), k = contiguous_copy(k_), v = contiguous_copy(v_);
  const Tensor gk = contiguous_or_undefined(gk_), gv = contiguous_or_undefined(gv_), s0 = contiguous_or_undefined(s0_);
  ScanShape s = shape_of(q, v, gk, gv);
  plan_rows(s, device_, ceil_div(s.dv, kWarps));
  const dim3 grid(static_cast<unsigned>(s.sequences), static_cast<unsigned>(slices_of(s)));
  dispatch_floating(q.dtype(), "gated_scan", [&]<class T>() {
    with_key_dim(s.dk, "gated_scan", [&]<int CK>() {
      const size_t bytes = sizeof(T) * Tiles<T, 32 * CK>::elements;
      launch_kernel(gated_scan_forward_kernel<T, CK>, grid, kBlockThreads, bytes, stream, "gated_scan", q.data<T>(),
                    k.data<T>(), v.data<T>(), data_or_null<T>(gk), data_or_null<T>(gv), data_or_null<T>(s0),
                    out.data<T>(), data_or_null<T>(final_state), s);
    });
  });
}

void sequential_backward(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& gk_, const Tensor& gv_,
                         const Tensor& s0_, const Tensor& dout_, const Tensor& dfinal_, const Tensor& dq,
                         const Tensor& dk, const Tensor& dv, const Tensor& dgk, const Tensor& dgv,
                         const Tensor& dinitial, int device_, cudaStream_t stream) {
  const Tensor q = contiguous_copy(q_), k = contiguous_copy(k_), v = contiguous_copy(v_);
  const Tensor gk = contiguous_or_undefined(gk_), gv = contiguous_or_undefined(gv_), s0 = contiguous_or_undefined(s0_);
  const Tensor dout = contiguous_copy(dout_), dfinal = contiguous_or_undefined(dfinal_);
  ScanShape s = shape_of(q, v, gk, gv);
  plan_rows(s, device_, kMaxBackwardSlices);
  const int64_t slices = slices_of(s);
  // Checkpoints every ~sqrt(T) steps: scratch of (T / chunk + chunk) states per block is smallest.
  s.chunk = kTile * ceil_div(static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(s.steps)))), kTile);
  const dim3 grid(static_cast<unsigned>(s.sequences), static_cast<unsigned>(slices));
  const int64_t per_step = s.sequences * s.steps;  // rows of the (sequences, steps, .) outputs
  dispatch_floating(q.dtype(), "gated_scan_backward", [&]<class T>() {
    with_key_dim(s.dk, "gated_scan_backward", [&]<int CK>() {
      constexpr int DK = 32 * CK;
      using Buffer = std::unique_ptr<DeviceBuffer>;
      const int64_t slot_elements = static_cast<int64_t>(s.rows_per_warp) * kWarps * DK;
      const Buffer states = scratch_of<T>(static_cast<int64_t>(grid.x) * grid.y *
                                              (ceil_div(s.steps, s.chunk) + s.chunk) * slot_elements,
                                          device_);
      // Sums over rows go through per-slice partials when there are several slices (and, for a
      // scalar key decay, also over the key dim); with one slice they are the outputs themselves.
      const bool direct = slices == 1;
      const bool gk_direct = direct && s.gk_width > 1;
      const int64_t parts_size = slices * per_step * s.dk;
      const Buffer dq_parts = scratch_of<T>(dq.defined() && !direct ? parts_size : 0, device_);
      const Buffer dk_parts = scratch_of<T>(dk.defined() && !direct ? parts_size : 0, device_);
      const Buffer dgk_parts = scratch_of<T>(dgk.defined() && !gk_direct ? parts_size : 0, device_);
      // dgv per channel; summed over channels afterwards for a scalar value decay.
      const bool gv_direct = s.gv_width > 1;
      const Buffer dgv_full = scratch_of<T>(dgv.defined() && !gv_direct ? per_step * s.dv : 0, device_);
      auto target = [](const Tensor& out, bool is_direct, const Buffer& parts) -> T* {
        if (!out.defined()) return nullptr;
        return is_direct ? out.data<T>() : parts->as<T>();
      };
      const size_t bytes = sizeof(T) * (Tiles<T, DK>::elements + 2 * kTile * kMaxBlockRows + 2 * 3 * kWarps * DK);
      launch_kernel(gated_scan_backward_kernel<T, CK>, grid, kBlockThreads, bytes, stream, "gated_scan_backward",
                    q.data<T>(), k.data<T>(), v.data<T>(), data_or_null<T>(gk), data_or_null<T>(gv),
                    data_or_null<T>(s0), dout.data<T>(), data_or_null<T>(dfinal), target(dq, direct, dq_parts),
                    target(dk, direct, dk_parts), target(dgk, gk_direct, dgk_parts), data_or_null<T>(dv),
                    target(dgv, gv_direct, dgv_full), data_or_null<T>(dinitial), states->as<T>(), s);

      auto finish = [&](const Tensor& out, const Buffer& parts, int64_t n_slices, int64_t width) {
        if (!out.defined() || !parts) return;
        const bool over_width = out.size(3) == 1 && width > 1;
        const int64_t n = over_width ? per_step : per_step * width;
        sum_parts_kernel<T><<<blocks_for(n, device_), kThreads, 0, stream>>>(parts->as<T>(), n_slices, per_step, width,
                                                                             over_width, out.data<T>());
        LINEA_CUDA_LAUNCH_CHECK("gated_scan_backward", "summing ", n_slices, " row slices of ", out.describe());
      };
      finish(dq, dq_parts, slices, s.dk);
      finish(dk, dk_parts, slices, s.dk);
      finish(dgk, dgk_parts, slices, s.dk);
      finish(dgv, dgv_full, 1, s.dv);
    });
  });
}

}  // namespace

// A bfloat16 scan (bfloat16 q, k, v and dout; float32 decays and states): the chunked kernels read
// and write its bfloat16 tensors in place, with their products on the bfloat16 tensor cores; the
// sequential ones compute in float32 on float32 stand-ins (tensor/widen.h), the results rounded once.
void CudaBackend::gated_scan(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
                             const Tensor& s0, const Tensor& out, const Tensor& final_state, ScanAlgorithm algorithm,
                             Tensor* kept) const {
  check_on_device(device_, "gated_scan", {&q, &k, &v, &gk, &gv, &s0, &out, &final_state});
  const cudaStream_t stream = use_device(device_);
  if (algorithm == ScanAlgorithm::Chunked) {
    chunked_scan_forward({q, k, v, gk, gv, s0}, out, final_state, kept, device_, stream);
    return;
  }
  Float32StandIns f32(*this);
  const Tensor out32 = f32.output(out);
  with_contiguous_outputs(*this, {&out32, &final_state}, [&](const std::vector<Tensor>& o) {
    sequential_forward(f32.input(q), f32.input(k), f32.input(v), gk, gv, s0, o[0], o[1], device_, stream);
  });
  f32.narrow_outputs();
}

void CudaBackend::gated_scan_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk,
                                      const Tensor& gv, const Tensor& s0, const Tensor& dout, const Tensor& dfinal,
                                      const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dgk,
                                      const Tensor& dgv, const Tensor& dinitial, ScanAlgorithm algorithm,
                                      const Tensor& kept) const {
  check_on_device(device_, "gated_scan_backward",
                  {&q, &k, &v, &gk, &gv, &s0, &dout, &dfinal, &dq, &dk, &dv, &dgk, &dgv, &dinitial, &kept});
  const cudaStream_t stream = use_device(device_);
  if (algorithm == ScanAlgorithm::Chunked) {
    chunked_scan_backward({q, k, v, gk, gv, s0}, dout, dfinal, {dq, dk, dv, dgk, dgv, dinitial}, kept, device_, stream);
    return;
  }
  Float32StandIns f32(*this);
  const Tensor q32 = f32.input(q), k32 = f32.input(k), v32 = f32.input(v), dout32 = f32.input(dout);
  const Tensor dq32 = f32.output(dq), dk32 = f32.output(dk), dv32 = f32.output(dv);
  with_contiguous_outputs(*this, {&dq32, &dk32, &dv32, &dgk, &dgv, &dinitial}, [&](const std::vector<Tensor>& g) {
    sequential_backward(q32, k32, v32, gk, gv, s0, dout32, dfinal, g[0], g[1], g[2], g[3], g[4], g[5], device_,
                        stream);
  });
  f32.narrow_outputs();
}

}  // namespace linea::cuda
