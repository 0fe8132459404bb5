#pragma once
// Dims merged into runs: the first step of every elementwise loop, on the CPU (cpu/strided_loop.h)
// and on the GPU (cuda/launch.cuh). N operands share one iteration shape, each with its own
// strides (in elements; 0 along broadcast dims). Neighbouring dims that are contiguous for every
// operand become one, so a plain contiguous tensor is a single run whatever its rank.
#include <array>
#include <cstdint>
#include <vector>

#include "tensor/shape.h"

namespace linea {

template <size_t N>
struct Runs {
  std::vector<int64_t> sizes;                   // merged dims, outermost first
  std::array<std::vector<int64_t>, N> strides;  // per operand, per merged dim
};

template <size_t N>
Runs<N> merge_dims(const Shape& shape, const std::array<const Shape*, N>& strides) {
  Runs<N> r;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // size-1 dims never move the pointer
    bool mergeable = !r.sizes.empty();
    for (size_t k = 0; k < N && mergeable; ++k)
      mergeable = r.strides[k].back() == (*strides[k])[d] * shape[d];
    if (mergeable) {
      r.sizes.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) r.strides[k].back() = (*strides[k])[d];
    } else {
      r.sizes.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) r.strides[k].push_back((*strides[k])[d]);
    }
  }
  if (r.sizes.empty()) {  // a single element
    r.sizes.push_back(1);
    for (size_t k = 0; k < N; ++k) r.strides[k].push_back(0);
  }
  return r;
}

}  // namespace linea
