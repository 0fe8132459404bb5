// Index kernels on CUDA: index_select and gather read through an index; index_add and
// scatter_add accumulate through one, deterministically.
//
// Bounds: index_select and gather check each index where they read it; a bad one sets a flag
// (with the value) instead of reading, and the host raises the CPU's Error at its next wait for
// the device (cuda/deferred_checks.h), not at once: a wait per call kept a training step's host
// from queueing its backward while the forward ran. While the stream is being captured into a graph
// (cuda/graph.h) the host cannot wait: the kernel still refuses to read out of bounds, but no
// Error can follow, so a graph's caller must pass indices it knows are in range (the decode
// graph's token ids come from its own sampling over the vocabulary, train/decode_graph.h).
//
// Determinism: a float atomicAdd per source would sum repeated targets in whatever order the
// threads arrive, so results would change from run to run. Instead the host, which reads the
// index anyway (to check it), groups the sources by target with a stable sort: for each distinct
// target, the list of its sources in index order (a CSR layout). One thread per target (and per
// inner element) then adds them in that order, starting from the current value, in the tensor's
// own precision: the same additions in the same order as the CPU loop, so the results are the
// CPU's bit for bit. The cost is one device->host copy of the index and an O(n) host pass.
#include <algorithm>
#include <cstring>
#include <numeric>

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

// Sources grouped by target, in a stable order: groups[0, unique) are the distinct targets
// (ascending), groups[unique, 2 unique + 1) where each one's sources start in `order`, and
// order (the rest) the source positions, ascending within a target.
struct Groups {
  std::vector<int64_t> packed;
  int64_t unique = 0;
};

Groups group_by_target(const std::vector<int64_t>& target, int64_t num_targets) {
  const int64_t n = static_cast<int64_t>(target.size());
  std::vector<int64_t> order(n);
  if (num_targets <= 4 * n + 4096) {  // counting sort: linear, stable
    std::vector<int64_t> next(num_targets + 1, 0);
    for (int64_t t : target) ++next[t + 1];
    std::partial_sum(next.begin(), next.end(), next.begin());
    for (int64_t j = 0; j < n; ++j) order[next[target[j]]++] = j;
  } else {  // few sources into a huge tensor: sort the sources instead of counting targets
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return target[x] < target[y]; });
  }
  std::vector<int64_t> targets, starts;
  for (int64_t p = 0; p < n; ++p) {
    if (p == 0 || target[order[p]] != target[order[p - 1]]) {
      targets.push_back(target[order[p]]);
      starts.push_back(p);
    }
  }
  starts.push_back(n);
  Groups g;
  g.unique = static_cast<int64_t>(targets.size());
  g.packed = std::move(targets);
  g.packed.insert(g.packed.end(), starts.begin(), starts.end());
  g.packed.insert(g.packed.end(), order.begin(), order.end());
  return g;
}

// out viewed as (outer, size, inner), src as (outer, count, inner): for each group u and each
// (o, i), out[o, target_u, i] += src[o, j, i] for the group's sources j in order.
// scatter_add passes outer = inner = 1 and flat positions as targets and sources.
template <class T>
__global__ void accumulate_groups(T* out, const T* src, const int64_t* groups, int64_t unique, int64_t outer,
                                  int64_t inner, int64_t size, int64_t count) {
  const int64_t* targets = groups;
  const int64_t* starts = groups + unique;
  const int64_t* order = starts + unique + 1;
  LINEA_GRID_STRIDE_LOOP(e, outer * unique * inner) {
    const int64_t i = e % inner, r = e / inner;
    const int64_t u = r % unique, o = r / unique;
    T* dst = out + (o * size + targets[u]) * inner + i;
    const T* from = src + o * count * inner + i;
    T acc = *dst;
    for (int64_t p = starts[u]; p < starts[u + 1]; ++p) acc += from[order[p] * inner];
    *dst = acc;
  }
}

// Uploads the groups and runs accumulate_groups.
void accumulate(const char* op, int device, const Tensor& out, const Tensor& src, const Groups& g, int64_t outer,
                int64_t inner, int64_t size, int64_t count) {
  if (g.unique == 0 || outer * inner == 0) return;
  const cudaStream_t stream = use_device(device);
  DeviceBuffer groups(g.packed.size() * sizeof(int64_t), device);
  copy_to_device(groups.as<int64_t>(), g.packed.data(), g.packed.size() * sizeof(int64_t), device);
  dispatch_floating(out.dtype(), op, [&]<class T>() {
    accumulate_groups<T><<<blocks_for(outer * g.unique * inner, device), kThreads, 0, stream>>>(
        out.data<T>(), src.data<T>(), groups.as<int64_t>(), g.unique, outer, inner, size, count);
    LINEA_CUDA_LAUNCH_CHECK(op, out.describe(), ", ", g.unique, " targets from ", count, " sources");
  });
}

// The first out-of-range index, checked in order as the CPU does.
void check_indices(const std::vector<int64_t>& idx, int64_t size, const char* op) {
  for (int64_t i : idx) LINEA_CHECK(i >= 0 && i < size, op, "index ", i, " is out of range for a dim of size ", size);
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

void CudaBackend::index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src_in) const {
  LINEA_CHECK(out.is_contiguous(), "index_add", "accumulates into a contiguous tensor, got ", out.describe());
  const std::vector<int64_t> idx = index.to_vector<int64_t>();
  const int64_t size = out.size(dim), count = static_cast<int64_t>(idx.size());
  check_indices(idx, size, "index_add");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < out.dim(); ++d) {
    if (d < dim) outer *= out.size(d);
    else if (d > dim) inner *= out.size(d);
  }
  const Tensor src = contiguous_copy(src_in);
  accumulate("index_add", device_, out, src, group_by_target(idx, size), outer, inner, size, count);
}

void CudaBackend::scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src_in) const {
  LINEA_CHECK(out.is_contiguous(), "scatter_add", "accumulates into a contiguous tensor, got ", out.describe());
  std::vector<int64_t> target = index.to_vector<int64_t>();
  const int64_t size = out.size(dim);
  check_indices(target, size, "scatter_add");
  // Turn each index into the flat position it adds to: its own coordinates, with dim replaced.
  const Shape& shape = index.shape();
  const Shape strides = contiguous_strides(out.shape());
  Shape coord(shape.size(), 0);
  for (int64_t flat = 0; flat < static_cast<int64_t>(target.size()); ++flat) {
    int64_t offset = 0;
    for (size_t d = 0; d < coord.size(); ++d)
      offset += (static_cast<int64_t>(d) == dim ? target[flat] : coord[d]) * strides[d];
    target[flat] = offset;
    for (size_t d = shape.size(); d-- > 0;) {
      if (++coord[d] < shape[d]) break;
      coord[d] = 0;
    }
  }
  const Tensor src = contiguous_copy(src_in);
  accumulate("scatter_add", device_, out, src, group_by_target(target, out.numel()), 1, 1, 0, 0);
}

}  // namespace linea::cuda
