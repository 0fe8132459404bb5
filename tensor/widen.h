#pragma once
// Kernels that take bfloat16 by computing in float32 (the CPU's reference kernels, and the CUDA
// reductions): the inputs widened to float32 (exact), the float32 kernel run, and its result
// rounded once into the bfloat16 output. So a bfloat16 result is the float32 kernel's result
// rounded to nearest even: the reference the tests hold the native bfloat16 kernels to.
#include <utility>
#include <vector>

#include "tensor/backend.h"

namespace linea {

// A float32 copy of t (contiguous, on t's device), through the backend's copy kernel.
inline Tensor widened(const Backend& backend, const Tensor& t) {
  Tensor out = empty(t.shape(), kFloat32, t.device());
  backend.copy(t, out);
  return out;
}

// The float32 tensor to compute `out` into: out itself when it is not bfloat16, else a fresh
// float32 tensor of its shape that narrow_into then rounds into out.
inline Tensor float32_result(const Tensor& out) {
  return out.dtype() == kBFloat16 ? empty(out.shape(), kFloat32, out.device()) : out;
}
inline void narrow_into(const Backend& backend, const Tensor& result, const Tensor& out) {
  if (!result.is_same(out)) backend.copy(result, out);
}

// The same for a kernel of several tensors: input() gives a float32 stand-in for each bfloat16
// input (others as they are), output() one for each bfloat16 output, which narrow_outputs() then
// rounds into it.
class Float32StandIns {
 public:
  explicit Float32StandIns(const Backend& backend) : backend_(backend) {}
  Tensor input(const Tensor& t) const {
    return t.defined() && t.dtype() == kBFloat16 ? widened(backend_, t) : t;
  }
  Tensor output(const Tensor& out) {
    if (!out.defined() || out.dtype() != kBFloat16) return out;
    Tensor result = float32_result(out);
    outputs_.emplace_back(result, out);
    return result;
  }
  void narrow_outputs() const {
    for (const auto& [result, out] : outputs_) narrow_into(backend_, result, out);
  }

 private:
  const Backend& backend_;
  std::vector<std::pair<Tensor, Tensor>> outputs_;  // (float32 result, bfloat16 output)
};

}  // namespace linea
