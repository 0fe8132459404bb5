#include "tensor/cpu/cpu_backend.h"

namespace linea::cpu {

DimSplit split_at(const Shape& shape, int64_t dim) {
  DimSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) s.outer *= shape[d];
    else if (d == dim) s.size = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

Tensor contiguous_copy(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = empty(t.shape(), t.dtype(), t.device());
  cpu_backend().copy(t, out);
  return out;
}

const Backend& cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

}  // namespace linea::cpu
