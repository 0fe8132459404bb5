#pragma once
// What every .cu file needs around a launch: a grid size for grid-stride loops, the check after
// the launch, per-element offsets into strided tensors, and warp-level reductions.
//
//   const cudaStream_t stream = use_device(device_);               // cuda/stream.h
//   const StridedOffsets<2> at = strided_offsets<2>(out.shape(), {&out.strides(), &in.strides()});
//   my_kernel<<<blocks_for(n, device_), kThreads, 0, stream>>>(n, at, ...);
//   LINEA_CUDA_LAUNCH_CHECK("my_op", "n=", n);
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "cuda/check.h"
#include "cuda/stream.h"
#include "tensor/dim_runs.h"
#include "tensor/scalar_math.h"
#include "tensor/shape.h"

namespace linea::cuda {

// Threads per block for elementwise kernels: 8 warps, a good default on every recent GPU.
constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items: enough to fill every SM several times over (so
// long loops keep the device busy), never more than n needs, at least 1.
inline unsigned blocks_for(int64_t n, int device, int threads = kThreads) {
  const int64_t needed = (n + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(sm_count(device)) * 32;
  return static_cast<unsigned>(needed < 1 ? 1 : (needed < cap ? needed : cap));
}

// Blocks of `per_block` items that cover n items.
inline int64_t ceil_div(int64_t n, int64_t per_block) { return (n + per_block - 1) / per_block; }

}  // namespace linea::cuda

// for (int64_t i = <this thread's first item>; i < n; i += <threads in the grid>)
#define LINEA_GRID_STRIDE_LOOP(i, n)                                                          \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);      \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// After every launch: a bad configuration (too many threads, too much shared memory) is reported
// here, naming the op and the sizes; faults inside the kernel surface at the next sync.
#define LINEA_CUDA_LAUNCH_CHECK(op, ...)                                                      \
  do {                                                                                        \
    const cudaError_t linea_launch_ = cudaGetLastError();                                     \
    if (linea_launch_ != cudaSuccess)                                                         \
      ::linea::fail(op, "kernel launch failed: ", cudaGetErrorString(linea_launch_)           \
                    __VA_OPT__(, " (", ) __VA_ARGS__ __VA_OPT__(, ")"));                      \
  } while (0)

namespace linea::cuda {

// Where element i (row-major over a shape) of each of N operands lies, in elements from the
// operand's first element. Passed to kernels by value. Built on the host by strided_offsets(),
// which merges dims that are contiguous for all operands (tensor/dim_runs.h), so contiguous
// tensors become one dim and the division loop is skipped.
template <int N>
struct StridedOffsets {
  int ndim = 1;                  // merged dims, outermost first
  bool index32 = false;          // every element index fits 32 bits: split it with 32-bit divisions
  int64_t sizes[kMaxDims];       // sizes[ndim - 1] is the innermost
  int64_t strides[kMaxDims][N];  // per merged dim, per operand; 0 where broadcast

  // off[k] = offset of element i in operand k (callable on the host too, for tests).
  __host__ __device__ __forceinline__ void at(int64_t i, int64_t (&off)[N]) const {
    if (ndim == 1) {
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] = i * strides[0][k];
      return;
    }
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    // Unrolled over kMaxDims with a guard, so that the arrays are indexed by constants (a
    // run-time index would copy the parameter struct to local memory).
    if (index32) {  // a 32-bit division is a few instructions, a 64-bit one a long subroutine
      uint32_t j = static_cast<uint32_t>(i);
#pragma unroll
      for (int d = kMaxDims - 1; d >= 0; --d) {
        if (d < ndim) {
          const uint32_t size = static_cast<uint32_t>(sizes[d]);
          const uint32_t q = j / size;
          const int64_t r = j - q * size;
          j = q;
#pragma unroll
          for (int k = 0; k < N; ++k) off[k] += r * strides[d][k];
        }
      }
      return;
    }
#pragma unroll
    for (int d = kMaxDims - 1; d >= 0; --d) {
      if (d < ndim) {
        const int64_t q = i / sizes[d];
        const int64_t r = i - q * sizes[d];
        i = q;
#pragma unroll
        for (int k = 0; k < N; ++k) off[k] += r * strides[d][k];
      }
    }
  }
};

// The order in which a kernel may visit the elements: Logical, row-major over the shape (element
// i is the i-th of the shape, for kernels that use i); Memory, in operand 0's memory order, for
// kernels that only use the offsets: dims sorted by operand 0's strides first, so that operands
// laid out alike through a permuted view (a (B, T, H, d) projection seen as (B, H, T, d)) merge
// into few dims, as contiguous ones do, and the kernel divides less per element.
enum class VisitOrder { Logical, Memory };

// Offsets for N operands iterated over `shape`, operand k having strides *strides[k].
template <int N>
StridedOffsets<N> strided_offsets(const Shape& shape, const std::array<const Shape*, N>& strides,
                                  VisitOrder order = VisitOrder::Logical) {
  Shape sorted_shape = shape;
  std::array<Shape, N> sorted_strides;
  std::array<const Shape*, N> sorted_pointers;
  for (int k = 0; k < N; ++k) sorted_strides[k] = *strides[k], sorted_pointers[k] = &sorted_strides[k];
  if (order == VisitOrder::Memory) {
    std::vector<size_t> dims(shape.size());
    for (size_t d = 0; d < dims.size(); ++d) dims[d] = d;
    const Shape& lead = *strides[0];
    std::stable_sort(dims.begin(), dims.end(), [&](size_t x, size_t y) { return std::abs(lead[x]) > std::abs(lead[y]); });
    for (size_t d = 0; d < dims.size(); ++d) {
      sorted_shape[d] = shape[dims[d]];
      for (int k = 0; k < N; ++k) sorted_strides[k][d] = (*strides[k])[dims[d]];
    }
  }
  const Runs<N> runs = merge_dims<N>(sorted_shape, sorted_pointers);
  StridedOffsets<N> s;
  s.ndim = static_cast<int>(runs.sizes.size());
  s.index32 = numel_of(shape) <= static_cast<int64_t>(UINT32_MAX);
  LINEA_CHECK(s.ndim <= kMaxDims, "cuda", "more than ", kMaxDims, " dims in shape ", shape_str(shape));
  for (int d = 0; d < kMaxDims; ++d) {
    s.sizes[d] = d < s.ndim ? runs.sizes[d] : 1;
    for (int k = 0; k < N; ++k) s.strides[d][k] = d < s.ndim ? runs.strides[k][d] : 0;
  }
  return s;
}

// Allows `bytes` of dynamic shared memory for `kernel` (above 48 KB needs opting in).
template <class... KernelArgs>
void allow_shared_bytes(void (*kernel)(KernelArgs...), size_t bytes, const char* op) {
  LINEA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
                   op, bytes, " bytes of shared memory");
}

// Launches `kernel` on `grid` blocks of `threads` with `bytes` of dynamic shared memory; a failed
// launch is an Error naming op and the configuration.
template <class... KernelArgs, class... Args>
void launch_kernel(void (*kernel)(KernelArgs...), dim3 grid, int threads, size_t bytes, cudaStream_t stream,
                   const char* op, Args&&... args) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  allow_shared_bytes(kernel, bytes, op);
  kernel<<<grid, threads, bytes, stream>>>(std::forward<Args>(args)...);
  LINEA_CUDA_LAUNCH_CHECK(op, grid.x, " x ", grid.y, " blocks of ", threads, " threads, ", bytes,
                          " bytes of shared memory");
}

// ---- Overlapped launches (programmatic dependent launch, sm_90 and newer).
// A decoding step is a chain of small kernels, each waiting for the one before; between two of
// them the GPU drains the first, then launches the second, which fetches its weights and stages
// its inputs before it computes anything: a few microseconds per kernel in which the memory
// system idles. A kernel launched with launch_overlapped may start while the kernel before it on
// the stream still runs, and do what needs no earlier kernel's output (load its weights) before
// it calls wait_for_prior_kernels(), which returns once every earlier kernel has finished and
// its writes are visible. So a kernel launched this way must call wait_for_prior_kernels(), in
// every thread, before it reads anything an earlier kernel wrote or writes anything an earlier
// kernel reads. The same call lets the next overlapped kernel start; since that happens only
// after the wait, the part of a kernel before its wait runs after every kernel but the one just
// before it has finished. Captured into a CUDA graph the overlap becomes a programmatic edge, and
// replays keep it. Where the device or the kernel's build lacks sm_90 (or with
// LINEA_OVERLAP_LAUNCHES=0), launch_overlapped is launch_kernel and the call does nothing.
__device__ __forceinline__ void wait_for_prior_kernels() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Asks L2 for the 128-byte line at p: what a kernel may do before its wait with bytes an earlier
// kernel may still write (the line only moves into L2, where any later write lands too).
__device__ __forceinline__ void prefetch_to_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

template <class... KernelArgs, class... Args>
void launch_overlapped(void (*kernel)(KernelArgs...), dim3 grid, int threads, size_t bytes, int device,
                       cudaStream_t stream, const char* op, Args&&... args) {
  if (!kernel_overlaps(reinterpret_cast<const void*>(kernel), device))
    return launch_kernel(kernel, grid, threads, bytes, stream, op, std::forward<Args>(args)...);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  allow_shared_bytes(kernel, bytes, op);
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = bytes;
  config.stream = stream;
  config.attrs = &overlap;
  config.numAttrs = 1;
  const cudaError_t launched = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  cudaGetLastError();
  if (launched != cudaSuccess)
    fail(op, "kernel launch failed: ", cudaGetErrorString(launched), " (", grid.x, " x ", grid.y, " blocks of ",
         threads, " threads, ", bytes, " bytes of shared memory, overlapped)");
}

// Warp-level reductions (all 32 lanes take part; every lane gets the result). Sums in the
// type given: callers pass float or double accumulators as they need.
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The warp sums of v[0..N) at once: their shuffles interleave, so N take about the time of one.
template <int N, class T>
__device__ __forceinline__ void warp_sums(T* v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] += __shfl_xor_sync(0xffffffffu, v[i], offset);
}

// NaN-propagating, like max() on the CPU.
template <class T>
__device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = scalar::max_nan(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

}  // namespace linea::cuda
