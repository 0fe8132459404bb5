#pragma once
// Random inputs of a gated linear scan (nn/linear_attention/scan.h, autograd's gated_linear_scan), shared by
// the tests of the composite forms and of the fused op: q, k, v, the log decays of the key and the
// value side (none, one per step, or one per channel), and an optional initial state.
#include <functional>
#include <vector>

#include "autograd/engine.h"
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

// The inputs of a bfloat16 scan made from float64 ones, on `device`: q, k and v rounded to
// bfloat16, the decays and the initial state to float32 (a bfloat16 scan keeps them in float32);
// every tensor a leaf that requires grad.
inline ScanInputs bfloat16_scan_inputs(const ScanInputs& x, Device device) {
  auto leaf = [device](const Tensor& t, DType dtype) {
    return t.defined() ? to(to(detach(t), dtype), device).requires_grad_() : Tensor();
  };
  return {leaf(x.q, kBFloat16), leaf(x.k, kBFloat16), leaf(x.v, kBFloat16),
          leaf(x.gk, kFloat32), leaf(x.gv, kFloat32),  leaf(x.s0, kFloat32)};
}

// The same values as float64 leaves on the CPU (bfloat16 and float32 widen exactly); with
// `magnitudes`, their absolute values, the decays as they are.
inline ScanInputs widened_scan_inputs(const ScanInputs& x, bool magnitudes = false) {
  auto leaf = [](const Tensor& t, bool absolute) {
    if (!t.defined()) return Tensor();
    Tensor w = to(to(detach(t), kCPU), kFloat64);
    if (absolute) w = abs(w);
    return w.requires_grad_();
  };
  return {leaf(x.q, magnitudes), leaf(x.k, magnitudes), leaf(x.v, magnitudes),
          leaf(x.gk, false),     leaf(x.gv, false),     leaf(x.s0, magnitudes)};
}

// A scan's o and S_T and the gradients of in.differentiable() for the cotangents dout (of o) and
// dfinal (of S_T), all as float64 on the CPU: {o, S_T, grads...}.
inline std::vector<Tensor> scan_results(const ScanInputs& in, const Tensor& dout, const Tensor& dfinal,
                                        ScanAlgorithm algorithm) {
  const ScanResult r = gated_linear_scan_with_state(in.q, in.k, in.v, in.gk, in.gv, in.s0, algorithm);
  const Device device = in.q.device();
  const Tensor loss = sum(to(r.out, kFloat64) * to(to(dout, kFloat64), device)) +
                      sum(to(r.final_state, kFloat64) * to(to(dfinal, kFloat64), device));
  std::vector<Tensor> out = {r.out, r.final_state};
  for (const Tensor& g : grad(loss, in.differentiable())) out.push_back(g);
  for (Tensor& t : out) t = to(to(detach(t), kCPU), kFloat64);
  return out;
}

}  // namespace linea::testing
