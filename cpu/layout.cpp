#include "cpu/cpu_backend.h"

namespace linea::cpu {

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
