// Index kernels on CUDA: index_select and gather read through an index; index_add and
// scatter_add accumulate through one, deterministically.
//
// Bounds: index_select and gather check each index where they read it, index_add and
// scatter_add where they turn it into a target (below); a bad one sets a flag (with the value)
// instead of reading or writing, and the host raises the CPU's Error at its next wait for the
// device (cuda/deferred_checks.h), not at once: a wait per call kept a training step's host from
// queueing its backward while the forward ran. While the stream is being captured into a graph
// (cuda/graph.h) the host cannot wait: the kernels still refuse to go out of bounds, but no
// Error can follow, so a graph's caller must pass indices it knows are in range (the decode
// graph's token ids come from its own sampling over the vocabulary, train/decode_graph.h).
//
// Determinism: a float atomicAdd per source would sum repeated targets in whatever order the
// threads arrive, so results would change from run to run. Instead the sources are grouped by
// target on the device, behind the work already queued: the host neither reads the index nor
// waits (it used to copy the index back, which made the embedding's backward, the last op of a
// training step's backward, wait for the whole backward, and left the GPU idle while the host
// grouped). A kernel turns each index into its target, CUB's radix sort orders the (target,
// source position) pairs by target, and in the sorted list each run of equal targets holds one
// target's sources. The radix sort is stable and the positions go in ascending, so a run keeps
// them in index order. One thread per run (and per outer and inner element) adds them in that
// order, starting from the current value, in the tensor's own precision: the same additions in
// the same order as the CPU loop, so the results are the CPU's bit for bit, on every run. The
// sort looks only at the bits a target can have (16 for a vocabulary of 50257). The number of
// runs is known only on the device, so the adding kernel covers every source position, and a
// thread whose position does not start a run has nothing to do.
// A bad index gets a target past the last one, so it sorts last: the adding kernel then writes
// nothing (the CPU's index_add checks every index before adding) and the first bad position, the
// first of that last run, reports its value: the one the CPU names. Nothing here waits for the
// device or allocates outside the caching allocator, so the ops may be captured into a graph.
#include <algorithm>
#include <bit>
#include <cub/device/device_radix_sort.cuh>

#include "cuda/buffer.h"
#include "cuda/cuda_backend.h"
#include "cuda/deferred_checks.h"
#include "cuda/launch.cuh"

namespace linea::cuda {

namespace {

// Calls f.template operator()<E>() with E an unsigned integer of the element's size: moving
// elements needs no arithmetic, so the five dtypes share four instantiations.
template <class F>
void dispatch_bytes(DType dtype, F&& f) {
  switch (dtype_size(dtype)) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    case 8: return f.template operator()<uint64_t>();
  }
  fail("index", "unsupported element size ", dtype_size(dtype));
}

// Device-side report of a bad index: flag[0] = 1, flag[1] = the value (one of them, if several).
__device__ void report_bad_index(int64_t* flag, int64_t value) {
  if (atomicCAS(reinterpret_cast<unsigned long long*>(flag), 0ull, 1ull) == 0ull) flag[1] = value;
}

// Read back by the host at its next wait for the device (check() queues it, cuda/deferred_checks.h),
// except while a graph is captured: a replay cannot stop for the host, so there the flag is
// neither cleared nor read (a replayed decoding step's first node is then its embedding's kernel,
// not a memset).
class BadIndexFlag {
 public:
  BadIndexFlag(int device, cudaStream_t stream)
      : buffer_(2 * sizeof(int64_t), device), device_(device), capturing_(is_capturing(stream)) {
    if (!capturing_)
      LINEA_CUDA_CHECK(cudaMemsetAsync(buffer_.as<int64_t>(), 0, 2 * sizeof(int64_t), stream), "index");
  }
  int64_t* get() const { return buffer_.as<int64_t>(); }
  // Queues the check of the kernel queued before: the CPU's Error if it saw a bad index, raised at
  // the host's next wait (not while capturing).
  void check(const char* op, int64_t size) const {
    if (capturing_) return;
    defer_check(device_, buffer_.as<int64_t>(), 2, op, [size](const int64_t* v) -> std::string {
      return v[0] == 0 ? "" : check_message("index ", v[1], " is out of range for a dim of size ", size);
    });
  }

 private:
  static bool is_capturing(cudaStream_t stream) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    LINEA_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture), "index");
    return capture != cudaStreamCaptureStatusNone;
  }

  DeviceBuffer buffer_;
  int device_;
  bool capturing_;
};

// out[e] = in[base(e) + v * dim_stride] for index value v, which the caller read for element e;
// a v outside [0, size) is reported instead.
template <class E>
__device__ __forceinline__ void copy_indexed(const E* in, E* out, int64_t e, int64_t v, const StridedOffsets<1>& base,
                                             int64_t size, int64_t dim_stride, int64_t* bad) {
  if (v < 0 || v >= size) {
    report_bad_index(bad, v);
    return;
  }
  int64_t o[1];
  base.at(e, o);
  out[e] = in[o[0] + v * dim_stride];
}

// out[e] = in[base(e) + index[(e / inner) % count] * dim_stride]
template <class E>
__global__ void index_select_kernel(const E* in, E* out, const int64_t* index, int64_t n, StridedOffsets<1> base,
                                    int64_t inner, int64_t count, int64_t size, int64_t dim_stride, int64_t* bad) {
  LINEA_GRID_STRIDE_LOOP(e, n) copy_indexed(in, out, e, index[(e / inner) % count], base, size, dim_stride, bad);
}

// out[e] = in[base(e) + index[e] * dim_stride]
template <class E>
__global__ void gather_kernel(const E* in, E* out, const int64_t* index, int64_t n, StridedOffsets<1> base,
                              int64_t size, int64_t dim_stride, int64_t* bad) {
  LINEA_GRID_STRIDE_LOOP(e, n) copy_indexed(in, out, e, index[e], base, size, dim_stride, bad);
}

// The sort's input: keys[j] = the target of source j, base(j) + v * dim_stride for its index
// value v, or num_targets (past every target) when v is outside [0, size); positions[j] = j.
__global__ void target_keys(const int64_t* index, int64_t n, StridedOffsets<1> base, int64_t size, int64_t dim_stride,
                            int64_t num_targets, uint64_t* keys, int64_t* positions) {
  LINEA_GRID_STRIDE_LOOP(j, n) {
    const int64_t v = index[j];
    int64_t o[1];
    base.at(j, o);
    keys[j] = static_cast<uint64_t>(v >= 0 && v < size ? o[0] + v * dim_stride : num_targets);
    positions[j] = j;
  }
}

// out viewed as (outer, num_targets, inner), src as (outer, n, inner); keys sorted, with order the
// source positions they came from (ascending within equal keys). For each (o, i), the thread of
// the first p of a run of equal keys adds the run's sources to out[o, key, i] in order, starting
// from the current value; the other threads have nothing to do (there is no count of runs to
// launch for: the grid covers every p, as if each source had a target of its own).
// A bad index's key sorts last: then nothing is written, and the first of those keys, the lowest
// position with a bad value (the sort is stable), reports its value, the one the CPU reports.
template <class T>
__global__ void add_runs(T* out, const T* src, const uint64_t* keys, const int64_t* order, int64_t n,
                         int64_t num_targets, int64_t outer, int64_t inner, const int64_t* index, int64_t* bad) {
  const uint64_t past_end = static_cast<uint64_t>(num_targets);
  if (keys[n - 1] == past_end) {
    LINEA_GRID_STRIDE_LOOP(p, n) {
      if (keys[p] == past_end && (p == 0 || keys[p - 1] != past_end)) {
        bad[0] = 1;
        bad[1] = index[order[p]];
      }
    }
    return;
  }
  LINEA_GRID_STRIDE_LOOP(e, outer * n * inner) {
    const int64_t i = e % inner, r = e / inner;
    const int64_t p = r % n, o = r / n;
    const uint64_t key = keys[p];
    if (p > 0 && keys[p - 1] == key) continue;  // the run's first thread adds this source
    T* dst = out + (o * num_targets + static_cast<int64_t>(key)) * inner + i;
    const T* from = src + o * n * inner + i;
    T acc = *dst;
    for (int64_t q = p; q < n && keys[q] == key; ++q) acc += from[order[q] * inner];
    *dst = acc;
  }
}

// out (outer, num_targets, inner) += src (outer, n, inner) through the contiguous int64 index's n
// values, source j adding to target base(j) + v * dim_stride for its value v, which must lie in
// [0, size): keys on the device, CUB's radix sort, add_runs; a bad value is the CPU's Error at
// the host's next wait.
void accumulate_by_target(const char* op, int device, const Tensor& out, const Tensor& src, const Tensor& index,
                          const StridedOffsets<1>& base, int64_t size, int64_t dim_stride, int64_t num_targets,
                          int64_t outer, int64_t inner) {
  const int64_t n = index.numel();
  if (n == 0) return;
  const cudaStream_t stream = use_device(device);
  const BadIndexFlag bad(device, stream);
  DeviceBuffer key_buffers(2 * n * sizeof(uint64_t), device), position_buffers(2 * n * sizeof(int64_t), device);
  cub::DoubleBuffer<uint64_t> keys(key_buffers.as<uint64_t>(), key_buffers.as<uint64_t>() + n);
  cub::DoubleBuffer<int64_t> order(position_buffers.as<int64_t>(), position_buffers.as<int64_t>() + n);
  target_keys<<<blocks_for(n, device), kThreads, 0, stream>>>(index.data<int64_t>(), n, base, size, dim_stride,
                                                               num_targets, keys.Current(), order.Current());
  LINEA_CUDA_LAUNCH_CHECK(op, n, " indices into ", num_targets, " targets");
  // Every key is at most num_targets: the bits above its highest one are 0 and need no pass.
  const int end_bit = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(num_targets))));
  size_t temp_bytes = 0;
  LINEA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, order, n, 0, end_bit, stream), op,
                   n, " indices");
  DeviceBuffer temp(std::max<size_t>(temp_bytes, 1), device);
  LINEA_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.as<void>(), temp_bytes, keys, order, n, 0, end_bit, stream),
                   op, n, " indices");
  dispatch_floating(out.dtype(), op, [&]<class T>() {
    add_runs<T><<<blocks_for(outer * n * inner, device), kThreads, 0, stream>>>(
        out.data<T>(), src.data<T>(), keys.Current(), order.Current(), n, num_targets, outer, inner,
        index.data<int64_t>(), bad.get());
    LINEA_CUDA_LAUNCH_CHECK(op, out.describe(), ", ", n, " sources");
  });
  bad.check(op, size);
}

}  // namespace

void CudaBackend::index_select(const Tensor& in, int64_t dim, const Tensor& index_in, const Tensor& out) const {
  const int64_t n = out.numel();
  if (n == 0) return;
  const Tensor index = contiguous_copy(index_in);
  const int64_t count = index.numel();
  int64_t inner = 1;
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.size(d);
  Shape base_strides = in.strides();
  base_strides[dim] = 0;  // the index supplies the position along dim
  const StridedOffsets<1> base = strided_offsets<1>(out.shape(), {&base_strides});
  const cudaStream_t stream = use_device(device_);
  const BadIndexFlag bad(device_, stream);
  dispatch_bytes(in.dtype(), [&]<class E>() {
    index_select_kernel<E><<<blocks_for(n, device_), kThreads, 0, stream>>>(
        static_cast<const E*>(in.raw_data()), static_cast<E*>(out.raw_data()), index.data<int64_t>(), n, base, inner,
        count, in.size(dim), in.stride(dim), bad.get());
  });
  LINEA_CUDA_LAUNCH_CHECK("index_select", in.describe(), " dim ", dim, ", ", count, " indices");
  bad.check("index_select", in.size(dim));
}

void CudaBackend::gather(const Tensor& in, int64_t dim, const Tensor& index_in, const Tensor& out) const {
  const int64_t n = out.numel();
  if (n == 0) return;
  const Tensor index = contiguous_copy(index_in);
  Shape base_strides = in.strides();
  base_strides[dim] = 0;
  const StridedOffsets<1> base = strided_offsets<1>(index.shape(), {&base_strides});
  const cudaStream_t stream = use_device(device_);
  const BadIndexFlag bad(device_, stream);
  dispatch_bytes(in.dtype(), [&]<class E>() {
    gather_kernel<E><<<blocks_for(n, device_), kThreads, 0, stream>>>(
        static_cast<const E*>(in.raw_data()), static_cast<E*>(out.raw_data()), index.data<int64_t>(), n, base,
        in.size(dim), in.stride(dim), bad.get());
  });
  LINEA_CUDA_LAUNCH_CHECK("gather", in.describe(), " dim ", dim, ", index ", index.describe());
  bad.check("gather", in.size(dim));
}

void CudaBackend::index_add(const Tensor& out, int64_t dim, const Tensor& index_in, const Tensor& src_in) const {
  LINEA_CHECK(out.is_contiguous(), "index_add", "accumulates into a contiguous tensor, got ", out.describe());
  const Tensor index = contiguous_copy(index_in), src = contiguous_copy(src_in);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < out.dim(); ++d) {
    if (d < dim) outer *= out.size(d);
    else if (d > dim) inner *= out.size(d);
  }
  // The target is the index value itself.
  const Shape no_stride{0};
  const StridedOffsets<1> base = strided_offsets<1>({index.numel()}, {&no_stride});
  const int64_t size = out.size(dim);
  accumulate_by_target("index_add", device_, out, src, index, base, size, 1, size, outer, inner);
}

void CudaBackend::scatter_add(const Tensor& out, int64_t dim, const Tensor& index_in, const Tensor& src_in) const {
  LINEA_CHECK(out.is_contiguous(), "scatter_add", "accumulates into a contiguous tensor, got ", out.describe());
  const Tensor index = contiguous_copy(index_in), src = contiguous_copy(src_in);
  // The flat position in out that each index adds to: its own coordinates, with its value along dim.
  const Shape strides = contiguous_strides(out.shape());
  Shape base_strides = strides;
  base_strides[dim] = 0;
  const StridedOffsets<1> base = strided_offsets<1>(index.shape(), {&base_strides});
  accumulate_by_target("scatter_add", device_, out, src, index, base, out.size(dim), strides[dim], out.numel(), 1, 1);
}

}  // namespace linea::cuda
