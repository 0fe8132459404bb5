// Index kernels: index_select / index_add along one dim, gather / scatter_add elementwise.
// Every index is bounds-checked here, where it is read, so a bad id is an Error naming the op.
#include <cstring>

#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"

namespace linea::cpu {

namespace {

void check_index(int64_t i, int64_t size, const char* op) {
  LINEA_CHECK(i >= 0 && i < size, op, "index ", i, " is out of range for a dim of size ", size);
}

// The values of a contiguous int64 index, each checked against size.
const int64_t* checked_indices(const Tensor& index, int64_t size, const char* op) {
  const int64_t* idx = index.data<int64_t>();
  for (int64_t j = 0; j < index.numel(); ++j) check_index(idx[j], size, op);
  return idx;
}

// Visits every element of a contiguous `shape`, giving its flat position and coordinates.
template <class F>
void for_each_coordinate(const Shape& shape, F f) {
  const int64_t total = numel_of(shape);
  Shape coord(shape.size(), 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    f(flat, coord);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++coord[d] < shape[d]) break;
      coord[d] = 0;
    }
  }
}

// Visits every element of a contiguous int64 index (gather's, scatter_add's), checking its value
// v against size: f(flat, offset), where offset locates the element's coordinates with v in
// place of the one along dim, through `strides`.
template <class F>
void for_each_indexed(const Tensor& index, int64_t dim, int64_t size, const Shape& strides, const char* op, F f) {
  const int64_t* idx = index.data<int64_t>();
  for_each_coordinate(index.shape(), [&](int64_t flat, const Shape& coord) {
    const int64_t v = idx[flat];
    check_index(v, size, op);
    int64_t offset = 0;
    for (size_t d = 0; d < coord.size(); ++d) offset += (static_cast<int64_t>(d) == dim ? v : coord[d]) * strides[d];
    f(flat, offset);
  });
}

}  // namespace

void CpuBackend::index_select(const Tensor& in_, int64_t dim, const Tensor& index_, const Tensor& out) const {
  const Tensor in = contiguous_copy(in_), index = contiguous_copy(index_);
  const DimSplit s = split_at(in.shape(), dim);
  const int64_t count = index.numel();
  const int64_t* idx = checked_indices(index, s.size, "index_select");
  const size_t bytes = dtype_size(in.dtype()) * s.inner;
  const char* src = static_cast<const char*>(in.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  parallel_for(s.outer * count, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(s.inner, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t row = begin; row < end; ++row) {
                   const int64_t o = row / count, j = row % count;
                   std::memcpy(dst + row * bytes, src + (o * s.size + idx[j]) * bytes, bytes);
                 }
               });
}

void CpuBackend::index_add(const Tensor& out, int64_t dim, const Tensor& index_, const Tensor& src_) const {
  const Tensor src = contiguous_copy(src_), index = contiguous_copy(index_);
  const DimSplit s = split_at(out.shape(), dim);
  const int64_t count = index.numel();
  const int64_t* idx = checked_indices(index, s.size, "index_add");
  dispatch_floating(out.dtype(), "index_add", [&]<class T>() {
    const T* from = src.data<T>();
    T* to = out.data<T>();
    // Parallel over (outer, inner) columns; within one, repeated ids add in index order, so the
    // result does not depend on the thread count.
    parallel_for(s.outer, 1, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o)
        for (int64_t j = 0; j < count; ++j) {
          const T* row = from + (o * count + j) * s.inner;
          T* target = to + (o * s.size + idx[j]) * s.inner;
          for (int64_t i = 0; i < s.inner; ++i) target[i] += row[i];
        }
    });
  });
}

void CpuBackend::gather(const Tensor& in, int64_t dim, const Tensor& index_, const Tensor& out) const {
  const Tensor index = contiguous_copy(index_);
  dispatch_all(in.dtype(), [&]<class T>() {
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    for_each_indexed(index, dim, in.size(dim), in.strides(), "gather",
                     [&](int64_t flat, int64_t offset) { dst[flat] = src[offset]; });
  });
}

void CpuBackend::scatter_add(const Tensor& out, int64_t dim, const Tensor& index_, const Tensor& src_) const {
  const Tensor index = contiguous_copy(index_), src = contiguous_copy(src_);
  const Shape strides = contiguous_strides(out.shape());
  dispatch_floating(out.dtype(), "scatter_add", [&]<class T>() {
    const T* from = src.data<T>();
    T* to = out.data<T>();
    for_each_indexed(index, dim, out.size(dim), strides, "scatter_add",
                     [&](int64_t flat, int64_t offset) { to[offset] += from[flat]; });
  });
}

}  // namespace linea::cpu
