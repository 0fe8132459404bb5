#pragma once
// What fused_linear's two kernels share (fused_linear.cu, which alone includes this file): their
// arguments, the warps of a block, and how a warp streams a row of weights: batches of 16-byte
// loads issued before any is used, and rows asked of L2 before the kernel waits.
#include <algorithm>
#include <cstdint>

#include "cuda/kernels/attention_splits.h"
#include "cuda/kernels/rows.cuh"
#include "tensor/fused_linear_math.h"

namespace linea::cuda {
namespace {

// Warps per block (each owns one output at a time). A plain product runs 16 warps in one block per
// SM: every block stages and norms the input rows again, and fewer, larger blocks measured faster
// (a ReGLA decoding step on the H200: 137 -> 129 us against 4 warps and up to 8 blocks per SM;
// 8 warps per block, or two blocks per SM at 64 registers a thread, were slower). A gated unit
// holds two rows of weights in flight per lane, too many registers for 16 warps: it keeps 4.
// The helpers take the warps as a template argument: with their loops striding by blockDim.x
// instead of a constant, the same ReGLA step took 25 us longer.
constexpr int warps_per_block(bool gated) { return gated ? 4 : 16; }
constexpr int64_t kStageBytes = 64 * 1024;       // shared memory for the staged input rows

template <class T>
struct ProductArgs {
  const T* x;
  int64_t x_stride;
  const T *weight, *bias, *up_weight, *up_bias, *norm_weight, *norm_bias;
  const T* residual;
  int64_t residual_stride;
  T* out;
  int rows;
  int64_t in, outputs;
  int64_t stage;  // elements of each input row staged at a time, a multiple of the load width
  int spans_log2;  // fused_row_kernel: an output's row in 2^spans_log2 spans, a warp each (spans_per_row_log2)
  RowNorm norm;
  double eps;
  bool activate;
  UnaryOp activation;
  AttentionSplits splits;  // the one row as an attention step's splits, where x is null (float only)
};

// kWidth elements loaded together: 16 bytes (float4 / double2), or one element when the weights'
// rows are not aligned for that.
template <class T, int kWidth>
struct alignas(sizeof(T) * kWidth) Pack {
  T v[kWidth];
};

template <class T, int kWidth>
__device__ __forceinline__ Pack<T, kWidth> load_weights(const T* p) {
  if constexpr (kWidth == 1) {
    return {{__ldg(p)}};
  } else if constexpr (sizeof(T) == 4) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(p));
    return {{v.x, v.y, v.z, v.w}};
  } else {
    const double2 v = __ldg(reinterpret_cast<const double2*>(p));
    return {{v.x, v.y}};
  }
}

// A warp's products of one output's row of weights with the staged part (len columns) go in
// batches of kUnroll 16-byte loads per lane, all issued before any is used (the ones past len
// predicated off), so that a whole short row is in flight at once.
constexpr int kUnroll = 8;

template <int kWidth>
constexpr int64_t kBatchColumns = kUnroll * 32 * kWidth;  // the columns of one batch

template <class T, int kWidth, bool kGated>
struct WeightBatch {
  Pack<T, kWidth> w[kUnroll], u[kUnroll];  // u: a gated unit's second row
};

// The batch whose lane-0 column is `base` - lane * kWidth (each lane loads its own columns).
template <class T, int kWidth, bool kGated>
__device__ __forceinline__ void load_batch(WeightBatch<T, kWidth, kGated>& b, const T* w_row, const T* u_row,
                                           int64_t base, int64_t len) {
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    const int64_t c = base + k * 32 * kWidth;
    if (c >= len) continue;
    b.w[k] = load_weights<T, kWidth>(w_row + c);
    if constexpr (kGated) b.u[k] = load_weights<T, kWidth>(u_row + c);
  }
}

// Asks the L2 cache for the bytes of a row of weights from column `from` on (at most 8 KB), so
// that its loads are on their way while the block waits and stages its input.
template <class T>
__device__ __forceinline__ void prefetch_row(const T* row, int64_t from, int64_t in) {
  constexpr int64_t kLine = 128 / sizeof(T);
  const int64_t lines = std::min<int64_t>((in - from + kLine - 1) / kLine, 64);
  for (int64_t l = threadIdx.x % 32; l < lines; l += 32)
    prefetch_to_l2(row + from + l * kLine);
}

// The rows a warp takes after its first `loaded` (a matrix of more outputs than the grid has
// warps, such as the head's 8192): at most kLaterRows of them asked of L2 before the wait, so that
// after it their loads find them there instead of going to memory one row after another.
constexpr int kLaterRows = 4;

template <class T, int kWarps, bool kGated>
__device__ __forceinline__ void prefetch_later_rows(const ProductArgs<T>& a, int64_t groups, int loaded = 1) {
  const int warp = threadIdx.x / 32;
  int n = 0;
  for (int64_t group = blockIdx.x + loaded * gridDim.x; group < groups && n < kLaterRows; group += gridDim.x, ++n) {
    const int64_t j = group * kWarps + warp;
    if (j >= a.outputs) break;
    prefetch_row(a.weight + j * a.in, 0, a.in);
    if constexpr (kGated) prefetch_row(a.up_weight + j * a.in, 0, a.in);
  }
}

}  // namespace
}  // namespace linea::cuda
