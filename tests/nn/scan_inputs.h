#pragma once
// Random inputs of a gated linear scan (nn/linear_attention/scan.h, autograd's gated_linear_scan), shared by
// the tests of the composite forms and of the fused op: q, k, v, the log decays of the key and the
// value side (none, one per step, or one per channel), and an optional initial state.
#include <functional>
#include <vector>

#include "tests/test_util.h"

namespace linea::testing {

enum class Decay { None, Scalar, PerChannel };

struct ScanInputs {
  Tensor q, k, v, gk, gv, s0;
  // The tensors a gradient is taken for, in this order: q, k, v, then gk, gv, s0 where defined.
  std::vector<Tensor> differentiable() const {
    std::vector<Tensor> out = {q, k, v};
    for (const Tensor& t : {gk, gv, s0})
      if (t.defined()) out.push_back(t);
    return out;
  }
};

struct ScanShape {
  int64_t B = 2, H = 2, T = 37, dk = 5, dv = 3;
};

// Log decays are drawn by `log_decay` (shape, generator) -> values <= 0; by default those of
// gates between about 0.2 and 1.
using LogDecayDraw = std::function<Tensor(const Shape&, Generator&)>;
inline Tensor default_log_decay(const Shape& shape, Generator& gen) {
  return uniform(shape, -1.5, -0.001, kFloat64, &gen);
}

// Drawn in float64 from `seed`, then cast to dtype, so both dtypes see the same values; every
// tensor is a leaf that requires grad.
inline ScanInputs draw_scan_inputs(Decay key, Decay value, bool initial_state, const ScanShape& s, DType dtype,
                                   uint64_t seed, const LogDecayDraw& log_decay = default_log_decay) {
  Generator gen(seed);
  auto leaf = [dtype](const Tensor& x) { return to(x, dtype).requires_grad_(); };
  auto decay = [&](Decay kind, int64_t width) {
    return kind == Decay::None ? Tensor() : leaf(log_decay({s.B, s.H, s.T, kind == Decay::Scalar ? 1 : width}, gen));
  };
  ScanInputs in;
  in.q = leaf(randn({s.B, s.H, s.T, s.dk}, kFloat64, &gen));
  in.k = leaf(randn({s.B, s.H, s.T, s.dk}, kFloat64, &gen));
  in.v = leaf(randn({s.B, s.H, s.T, s.dv}, kFloat64, &gen));
  in.gk = decay(key, s.dk);
  in.gv = decay(value, s.dv);
  if (initial_state) in.s0 = leaf(randn({s.B, s.H, s.dv, s.dk}, kFloat64, &gen));
  return in;
}

}  // namespace linea::testing
