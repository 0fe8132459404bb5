// Reductions (sum, max, min, argmax, argmin over any dims) and cumulative sums on CUDA.
//
// A reduction is seen as (rows, len): a row per output element (the kept dims, in order) and len
// elements reduced into each (the reduced dims). Each of the two index spaces has its own strided
// offsets, so any view is read in place, never through a permuting copy. Two ways to walk it:
// - Rows: threads of a warp (short rows) or of a block (long rows) stride along one row and
//   combine their values with warp shuffles. Good when the reduced elements are the close ones
//   in memory (a softmax-like sum over the last dim).
// - Columns: one thread per output element walks its row sequentially, so a warp reads 32
//   neighbouring output positions at once. Good when the kept dims are the close ones (the sum
//   over the batch dims of (B, T, C) that a bias gradient is), and for very short rows.
// With few rows, long rows are cut into chunks whose partial results a second pass combines, so
// the whole device takes part even in a full reduction to one number.
//
// Numbers: float sums accumulate in double, as on the CPU; the order differs from the CPU's but
// depends only on the shapes, so results are deterministic, and a float32 result equals the
// CPU's up to the rounding of the double total. Max/min propagate NaN (scalar::max_nan);
// argmax/argmin give the first position of the extreme, a NaN counting as the extreme, exactly as
// the CPU loop does (the combine step breaks ties by position, so the tree order does not matter).
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "cuda/buffer.h"
#include "cuda/cuda_backend.h"
#include "cuda/launch.cuh"
#include "tensor/scalar_math.h"
#include "tensor/widen.h"

namespace linea::cuda {

namespace {

template <class T>
using SumAcc = std::conditional_t<std::is_floating_point_v<T>, double, T>;

template <class T>
__device__ __forceinline__ T lowest() {
  if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}
template <class T>
__device__ __forceinline__ T highest() {
  if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::max();
}

// Each reducer: identity, lift(value, position) into the accumulator, an associative
// combine(a, b), and finish into the output element.
template <class T>
struct SumOp {
  using acc_t = SumAcc<T>;
  using out_t = T;
  __device__ static acc_t identity() { return acc_t(0); }
  __device__ static acc_t lift(T v, int64_t) { return acc_t(v); }
  __device__ static acc_t combine(acc_t a, acc_t b) { return a + b; }
  __device__ static out_t finish(acc_t a) { return static_cast<T>(a); }
};

template <class T, bool kMax>
struct ExtremeOp {
  using acc_t = T;
  using out_t = T;
  __device__ static acc_t identity() { return kMax ? lowest<T>() : highest<T>(); }
  __device__ static acc_t lift(T v, int64_t) { return v; }
  __device__ static acc_t combine(acc_t a, acc_t b) { return kMax ? scalar::max_nan(a, b) : scalar::min_nan(a, b); }
  __device__ static out_t finish(acc_t a) { return a; }
};

template <class T>
struct ArgAcc {
  T v;
  int64_t i;
};

template <class T, bool kMax>
struct ArgOp {
  using acc_t = ArgAcc<T>;
  using out_t = int64_t;
  __device__ static acc_t identity() { return {kMax ? lowest<T>() : highest<T>(), std::numeric_limits<int64_t>::max()}; }
  __device__ static acc_t lift(T v, int64_t i) { return {v, i}; }
  // The first NaN if any, else the first extreme: commutative and associative.
  __device__ static acc_t combine(acc_t a, acc_t b) {
    const bool a_nan = a.v != a.v, b_nan = b.v != b.v;
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan) {
      if (kMax ? a.v > b.v : a.v < b.v) return a;
      if (kMax ? b.v > a.v : b.v < a.v) return b;
    }
    return a.i <= b.i ? a : b;
  }
  __device__ static out_t finish(acc_t a) { return a.i; }
};

template <class A>
__device__ __forceinline__ A shfl_down(A a, int delta) {
  return __shfl_down_sync(0xffffffffu, a, delta);
}
template <class T>
__device__ __forceinline__ ArgAcc<T> shfl_down(ArgAcc<T> a, int delta) {
  return {__shfl_down_sync(0xffffffffu, a.v, delta), __shfl_down_sync(0xffffffffu, a.i, delta)};
}

// Lane 0 gets the warp's total.
template <class R>
__device__ typename R::acc_t warp_reduce(typename R::acc_t a) {
#pragma unroll
  for (int delta = 16; delta > 0; delta >>= 1) a = R::combine(a, shfl_down(a, delta));
  return a;
}

// Thread 0 gets the block's total; every thread of the block must call it.
template <class R>
__device__ typename R::acc_t block_reduce(typename R::acc_t a) {
  using acc_t = typename R::acc_t;
  __shared__ acc_t totals[32];  // one per warp; acc_t is plain data (no constructor)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  a = warp_reduce<R>(a);
  if (lane == 0) totals[warp] = a;
  __syncthreads();
  if (warp == 0) a = warp_reduce<R>(lane < warps ? totals[lane] : R::identity());
  __syncthreads();  // totals is reused by the caller's next row
  return a;
}

template <class T>
struct ReduceArgs {
  const T* in;
  StridedOffsets<1> row_at;  // output element -> offset of its row's first element
  StridedOffsets<1> col_at;  // position along the reduced dims -> offset within the row
  int64_t rows, len;
  int64_t splits, chunk;  // each row is cut into `splits` chunks of `chunk` positions
};

template <class R, class T>
__device__ __forceinline__ typename R::acc_t lift_at(const ReduceArgs<T>& a, int64_t base, int64_t c) {
  int64_t o[1];
  a.col_at.at(c, o);
  return R::lift(a.in[base + o[0]], c);
}

// A warp per row (rows of at most a few thousand elements); no partials.
template <class R, class T>
__global__ void rows_by_warp(ReduceArgs<T> a, typename R::out_t* out) {
  const int lane = threadIdx.x & 31;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t row = first; row < a.rows; row += warps) {
    int64_t base[1];
    a.row_at.at(row, base);
    typename R::acc_t acc = R::identity();
    for (int64_t c = lane; c < a.len; c += 32) acc = R::combine(acc, lift_at<R>(a, base[0], c));
    acc = warp_reduce<R>(acc);
    if (lane == 0) out[row] = R::finish(acc);
  }
}

// A block per (row, chunk): writes the row's result, or the chunk's partial when split.
template <class R, class T>
__global__ void rows_by_block(ReduceArgs<T> a, typename R::out_t* out, typename R::acc_t* partial) {
  for (int64_t p = blockIdx.x; p < a.rows * a.splits; p += gridDim.x) {  // uniform per block
    const int64_t row = p / a.splits, split = p - row * a.splits;
    int64_t base[1];
    a.row_at.at(row, base);
    const int64_t begin = split * a.chunk, end = min(a.len, begin + a.chunk);
    typename R::acc_t acc = R::identity();
    for (int64_t c = begin + threadIdx.x; c < end; c += blockDim.x) acc = R::combine(acc, lift_at<R>(a, base[0], c));
    acc = block_reduce<R>(acc);
    if (threadIdx.x == 0) {
      if (a.splits == 1) out[row] = R::finish(acc);
      else partial[p] = acc;
    }
  }
}

// A thread per (row, chunk), consecutive threads on consecutive rows.
template <class R, class T>
__global__ void columns(ReduceArgs<T> a, typename R::out_t* out, typename R::acc_t* partial) {
  LINEA_GRID_STRIDE_LOOP(p, a.rows * a.splits) {
    const int64_t split = p / a.rows, row = p - split * a.rows;
    int64_t base[1];
    a.row_at.at(row, base);
    const int64_t begin = split * a.chunk, end = min(a.len, begin + a.chunk);
    typename R::acc_t acc = R::identity();
    for (int64_t c = begin; c < end; ++c) acc = R::combine(acc, lift_at<R>(a, base[0], c));
    if (a.splits == 1) out[row] = R::finish(acc);
    else partial[row * a.splits + split] = acc;
  }
}

// partial (rows, splits), in chunk order -> out (rows): a warp per row.
template <class R>
__global__ void combine_partials(const typename R::acc_t* partial, int64_t rows, int64_t splits,
                                 typename R::out_t* out) {
  const int lane = threadIdx.x & 31;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t row = first; row < rows; row += warps) {
    typename R::acc_t acc = R::identity();
    for (int64_t s = lane; s < splits; s += 32) acc = R::combine(acc, partial[row * splits + s]);
    acc = warp_reduce<R>(acc);
    if (lane == 0) out[row] = R::finish(acc);
  }
}

constexpr int64_t kMaxSplits = 256;
constexpr int64_t kWarpRowMax = 1024;  // rows up to this long get a warp each

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

template <class R, class T>
void run_reduce(int device, ReduceArgs<T> a, typename R::out_t* out) {
  using acc_t = typename R::acc_t;
  const cudaStream_t stream = use_device(device);
  const int64_t sms = sm_count(device);
  const int64_t row_stride = a.row_at.strides[a.row_at.ndim - 1][0];
  const int64_t col_stride = a.col_at.strides[a.col_at.ndim - 1][0];
  const bool by_columns = a.rows > 1 && (a.len <= 16 || std::abs(row_stride) < std::abs(col_stride));
  const bool by_warp = !by_columns && a.len <= kWarpRowMax;

  // Chunks per row: enough (row, chunk) items to occupy the device, each still worth a thread
  // (columns: >= 32 elements) or a block (rows: >= 4096 elements).
  int64_t splits = 1;
  if (by_columns) splits = clamp64(ceil_div(sms * 2048, a.rows), 1, std::min(kMaxSplits, ceil_div(a.len, 32)));
  else if (!by_warp) splits = clamp64(ceil_div(2 * sms, a.rows), 1, std::min(kMaxSplits, ceil_div(a.len, 4096)));
  a.chunk = ceil_div(a.len, splits);
  a.splits = ceil_div(a.len, a.chunk);  // no empty chunks

  DeviceBuffer partial(a.splits > 1 ? a.rows * a.splits * sizeof(acc_t) : 0, device);
  if (by_columns) {
    columns<R, T><<<blocks_for(a.rows * a.splits, device), kThreads, 0, stream>>>(a, out, partial.as<acc_t>());
  } else if (by_warp) {
    rows_by_warp<R, T><<<blocks_for(a.rows * 32, device), kThreads, 0, stream>>>(a, out);
  } else {
    const int64_t blocks = std::min<int64_t>(a.rows * a.splits, sms * 32);
    rows_by_block<R, T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a, out, partial.as<acc_t>());
  }
  LINEA_CUDA_LAUNCH_CHECK("reduce", "rows=", a.rows, " len=", a.len, " splits=", a.splits);
  if (a.splits > 1) {
    combine_partials<R><<<blocks_for(a.rows * 32, device), kThreads, 0, stream>>>(partial.as<acc_t>(), a.rows,
                                                                                   a.splits, out);
    LINEA_CUDA_LAUNCH_CHECK("reduce", "combining ", a.rows, " x ", a.splits, " partials");
  }
}

// Strided offsets over the given dims of `in` only.
StridedOffsets<1> offsets_over(const Tensor& in, const std::vector<int64_t>& dims) {
  Shape sizes, strides;
  for (int64_t d : dims) {
    sizes.push_back(in.size(d));
    strides.push_back(in.stride(d));
  }
  return strided_offsets<1>(sizes, {&strides});
}

// cumsum of contiguous lines of `size` elements `inner` apart: a thread per line, in the CPU's
// order (so the results are the CPU's, bit for bit).
template <class T>
__global__ void cumsum_by_thread(const T* in, T* out, int64_t lines, int64_t size, int64_t inner, bool reverse) {
  LINEA_GRID_STRIDE_LOOP(line, lines) {
    const int64_t o = line / inner, i = line - o * inner;
    const int64_t base = o * size * inner + i;
    SumAcc<T> acc = 0;
    for (int64_t k = 0; k < size; ++k) {
      const int64_t j = reverse ? size - 1 - k : k;
      acc += in[base + j * inner];
      out[base + j * inner] = static_cast<T>(acc);
    }
  }
}

// cumsum of long contiguous rows: a block per row scans blockDim elements at a time (warp scans,
// then a scan of the warp totals) and carries the running total, in double.
template <class T>
__global__ void cumsum_by_block(const T* in, T* out, int64_t lines, int64_t size, bool reverse) {
  __shared__ double totals[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {  // uniform per block
    const T* x = in + line * size;
    T* y = out + line * size;
    double carry = 0;
    for (int64_t start = 0; start < size; start += blockDim.x) {
      const int64_t k = start + threadIdx.x;
      const int64_t j = reverse ? size - 1 - k : k;
      double v = k < size ? static_cast<double>(x[j]) : 0.0;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const double left = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += left;
      }
      if (lane == 31) totals[warp] = v;
      __syncthreads();
      if (warp == 0) {
        double t = lane < warps ? totals[lane] : 0.0;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
          const double left = __shfl_up_sync(0xffffffffu, t, d);
          if (lane >= d) t += left;
        }
        totals[lane] = t;  // inclusive scan of the warp totals
      }
      __syncthreads();
      if (k < size) y[j] = static_cast<T>(carry + ((warp > 0 ? totals[warp - 1] : 0.0) + v));
      carry += totals[warps - 1];
      __syncthreads();  // before totals is written again
    }
  }
}

}  // namespace

void CudaBackend::reduce(ReduceOp op, const Tensor& in, const std::vector<int64_t>& dims, const Tensor& out) const {
  if (in.dtype() == kBFloat16) {  // in float32 (the sums accumulate in double), rounded once
    const Tensor result = float32_result(out);
    reduce(op, widened(*this, in), dims, result);
    narrow_into(*this, result, out);
    return;
  }
  if (in.numel() == 0) {  // sums of nothing are 0; max/min of nothing are refused by the op
    fill(out, 0.0);
    return;
  }
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < in.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) kept.push_back(d);
  dispatch_all(in.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, bfloat16>) {  // bfloat16 took the float32 path
      fail("reduce", "bool tensors cannot be reduced");
    } else {
      ReduceArgs<T> a{in.data<T>(), offsets_over(in, kept), offsets_over(in, dims), 1, 1, 1, 1};
      for (int64_t d : kept) a.rows *= in.size(d);
      a.len = in.numel() / a.rows;
      switch (op) {
        case ReduceOp::Sum: return run_reduce<SumOp<T>>(device_, a, out.data<T>());
        case ReduceOp::Max: return run_reduce<ExtremeOp<T, true>>(device_, a, out.data<T>());
        case ReduceOp::Min: return run_reduce<ExtremeOp<T, false>>(device_, a, out.data<T>());
        case ReduceOp::ArgMax: return run_reduce<ArgOp<T, true>>(device_, a, out.data<int64_t>());
        case ReduceOp::ArgMin: return run_reduce<ArgOp<T, false>>(device_, a, out.data<int64_t>());
      }
    }
  });
}

void CudaBackend::cumsum(const Tensor& in, int64_t dim, bool reverse, const Tensor& out) const {
  const Tensor x = contiguous_copy(in);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < dim) outer *= x.size(d);
    else if (d > dim) inner *= x.size(d);
  }
  const int64_t size = x.dim() ? x.size(dim) : 1;
  if (x.numel() == 0) return;
  dispatch_floating(x.dtype(), "cumsum", [&]<class T>() {
    const cudaStream_t stream = use_device(device_);
    if (inner == 1 && size >= 256) {
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(outer, sm_count(device_) * 32));
      cumsum_by_block<T><<<blocks, kThreads, 0, stream>>>(x.data<T>(), out.data<T>(), outer, size, reverse);
    } else {
      cumsum_by_thread<T><<<blocks_for(outer * inner, device_), kThreads, 0, stream>>>(
          x.data<T>(), out.data<T>(), outer * inner, size, inner, reverse);
    }
    LINEA_CUDA_LAUNCH_CHECK("cumsum", x.describe(), " along dim ", dim);
  });
}

}  // namespace linea::cuda
