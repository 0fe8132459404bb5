#pragma once
// The loop under every elementwise CPU kernel. N operands share one iteration shape; each has its
// own strides (in elements; 0 along broadcast dims). Dims that are contiguous for all operands
// are merged first, so a plain contiguous tensor becomes a single run and the inner loop
// vectorizes. Runs of the innermost dim are handed to `body` in parallel chunks.
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "cpu/parallel.h"
#include "tensor/dim_runs.h"
#include "tensor/shape.h"

namespace linea::cpu {

// Calls body(offsets, count, steps): for i in [0, count), operand k's element is at
// offsets[k] + i * steps[k]. Offsets are relative to each operand's first element.
template <size_t N, class Body>
void for_each_run(const Shape& shape, const std::array<const Shape*, N>& strides, Body&& body,
                  int64_t grain = kElementwiseGrain) {
  if (numel_of(shape) == 0) return;
  const Runs<N> r = merge_dims<N>(shape, strides);
  const size_t outer_dims = r.sizes.size() - 1;
  const int64_t inner = r.sizes.back();
  std::array<int64_t, N> steps;
  for (size_t k = 0; k < N; ++k) steps[k] = r.strides[k].back();

  int64_t rows = 1;
  for (size_t d = 0; d < outer_dims; ++d) rows *= r.sizes[d];

  if (rows == 1) {  // one long run: split it
    parallel_for(inner, grain, [&](int64_t begin, int64_t end) {
      std::array<int64_t, N> offsets;
      for (size_t k = 0; k < N; ++k) offsets[k] = begin * steps[k];
      body(offsets, end - begin, steps);
    });
    return;
  }
  parallel_for(rows, std::max<int64_t>(1, grain / inner), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      std::array<int64_t, N> offsets{};
      int64_t rest = row;
      for (size_t d = outer_dims; d-- > 0;) {
        const int64_t i = rest % r.sizes[d];
        rest /= r.sizes[d];
        for (size_t k = 0; k < N; ++k) offsets[k] += i * r.strides[k][d];
      }
      body(offsets, inner, steps);
    }
  });
}

}  // namespace linea::cpu
