#pragma once
// The strided elementwise loop the CUDA backend's elementwise ops share (elementwise.cu,
// refined_gate.cu): a functor receives each element's index and its offsets in every operand
// (cuda/launch.cuh), so any strided or broadcast view works.
#include "cuda/cuda_backend.h"
#include "cuda/launch.cuh"

namespace linea::cuda {

template <int N, class F>
__global__ void elementwise_kernel(int64_t n, StridedOffsets<N> at, F f) {
  LINEA_GRID_STRIDE_LOOP(i, n) {
    int64_t off[N];
    at.at(i, off);
    f(i, off);
  }
}

// Calls f(i, off) for every element i of `shape`; off[k] is its offset in operand k.
// `order`: VisitOrder::Memory where f ignores i (cuda/launch.cuh).
template <int N, class F>
void for_each_element(const char* op, int device, const Shape& shape, const std::array<const Shape*, N>& strides,
                      const F& f, VisitOrder order = VisitOrder::Logical) {
  const int64_t n = numel_of(shape);
  if (n == 0) return;
  const cudaStream_t stream = use_device(device);
  const StridedOffsets<N> at = strided_offsets<N>(shape, strides, order);
  elementwise_kernel<N><<<blocks_for(n, device), kThreads, 0, stream>>>(n, at, f);
  LINEA_CUDA_LAUNCH_CHECK(op, "shape ", shape_str(shape));
}

}  // namespace linea::cuda
