// The fused gated linear scan (autograd/ops.h: gated_linear_scan, the CPU kernel of
// cpu/gated_scan.cpp) against the two composite forms of nn/linear_attention/scan.h, the chunked
// parallel form and the token-by-token recurrence: outputs, final states and every gradient, in
// float64 and float32, over every layout of the decays, lengths around the backward's chunk of
// 64, one step and none, decays at the gate floor and near 0, closed gates, strided inputs; then
// scan()'s dispatch, the layers with the fused scan on and off, and the op's errors.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "nn/linear_attention/linear_attention.h"
#include "nn/linear_attention/scan.h"
#include "tests/nn/scan_inputs.h"
#include "tests/test_util.h"

namespace linea {
namespace {

using nn::linear::chunked_scan;
using nn::linear::recurrent_scan;

using testing::Decay;
using Inputs = testing::ScanInputs;

struct Layout {
  const char* name;
  Decay key, value;
};

const Layout kLayouts[] = {
    {"no_decay", Decay::None, Decay::None},
    {"scalar_key", Decay::Scalar, Decay::None},
    {"key", Decay::PerChannel, Decay::None},
    {"scalar_value", Decay::None, Decay::Scalar},
    {"value", Decay::None, Decay::PerChannel},
    {"both", Decay::PerChannel, Decay::PerChannel},
    {"scalar_both", Decay::Scalar, Decay::Scalar},
    {"scalar_key_value", Decay::Scalar, Decay::PerChannel},
    {"key_scalar_value", Decay::PerChannel, Decay::Scalar},
};

struct Draw {
  int64_t B = 2, H = 2, T = 37, dk = 5, dv = 3;
  bool initial_state = true;
  double decay_low = -1.5, decay_high = -0.001;  // log decays uniform in [low, high]
};

Inputs make_inputs(const Layout& layout, const Draw& d, DType dtype, uint64_t seed) {
  return testing::draw_scan_inputs(layout.key, layout.value, d.initial_state, {d.B, d.H, d.T, d.dk, d.dv}, dtype, seed,
                                   [&d](const Shape& shape, Generator& gen) {
                                     return uniform(shape, d.decay_low, d.decay_high, kFloat64, &gen);
                                   });
}

enum class Form { Fused, Chunked, Recurrent };

// o, S_T and the gradients of loss = <o, R_o> + <S_T, R_s> (fixed random R) for one form.
struct Result {
  Tensor out, final_state;
  std::vector<Tensor> grads;
};

Result run(Form form, const Inputs& in) {
  Result r;
  switch (form) {
    case Form::Fused: {
      const ScanResult s = gated_linear_scan_with_state(in.q, in.k, in.v, in.gk, in.gv, in.s0);
      r.out = s.out;
      r.final_state = s.final_state;
      break;
    }
    case Form::Chunked: r.out = chunked_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, &r.final_state); break;
    case Form::Recurrent: r.out = recurrent_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, &r.final_state); break;
  }
  Generator gen(99);
  const Tensor r_o = to(randn(r.out.shape(), kFloat64, &gen), r.out.dtype());
  const Tensor r_s = to(randn(r.final_state.shape(), kFloat64, &gen), r.out.dtype());
  r.grads = grad(sum(r.out * r_o) + sum(r.final_state * r_s), in.differentiable());
  return r;
}

// max |a - b| / max |b|: the error relative to the reference's scale (infinite if a is not finite).
double relative_error(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.shape(), expected.shape());
  EXPECT_EQ(actual.dtype(), expected.dtype());
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::abs(a[i] - e[i]));
    scale = std::max(scale, std::abs(e[i]));
  }
  return scale == 0.0 ? diff : diff / scale;
}

double tolerance(DType dtype) { return dtype == kFloat64 ? 1e-10 : 1e-5; }

// The largest fused-vs-composite errors of a test, printed at its end for the record.
struct Worst {
  double error = 0.0;
  std::string where;
  void update(double e, const std::string& w) {
    if (e > error) error = e, where = w;
  }
  void print(const char* what) const { std::printf("[ gated_scan ] %s: %.3g (%s)\n", what, error, where.c_str()); }
};

// The fused result agrees with a composite one in o, S_T and every gradient; returns the worst error.
double compare(const Result& fused, const Result& reference, double tol, const std::string& label) {
  double worst = 0.0;
  auto check = [&](const Tensor& a, const Tensor& b, const std::string& what) {
    const double e = relative_error(a, b);
    EXPECT_LE(e, tol) << label << ": " << what;
    worst = std::max(worst, e);
  };
  check(fused.out, reference.out, "output");
  check(fused.final_state, reference.final_state, "final state");
  EXPECT_EQ(fused.grads.size(), reference.grads.size());
  for (size_t i = 0; i < fused.grads.size() && i < reference.grads.size(); ++i)
    check(fused.grads[i], reference.grads[i],
          "gradient of input " + std::to_string(i) + " of (q, k, v, [gk], [gv], [s0])");
  return worst;
}

std::string label_of(const Layout& layout, const Draw& d, DType dtype) {
  return std::string(layout.name) + " T=" + std::to_string(d.T) + " dk=" + std::to_string(d.dk) +
         " dv=" + std::to_string(d.dv) + (d.initial_state ? " s0" : "") + " " + dtype_name(dtype);
}

TEST(GatedScan, MatchesChunkedAndRecurrentForms) {
  Worst chunked64, recurrent64, chunked32, recurrent32;
  uint64_t seed = 1;
  for (const Layout& layout : kLayouts)
    for (int64_t T : {1, 37, 64, 65, 130})  // one step; around and across the backward's chunk of 64
      for (bool initial : {false, true})
        for (DType dtype : {kFloat64, kFloat32}) {
          // Key dims shorter than, just over and well over the CPU kernel's blocks of 8 lanes.
          const int64_t dk = T == 37 ? 9 : T == 65 ? 20 : 5, dv = T == 37 ? 4 : T == 65 ? 6 : 3;
          const Draw d{.T = T, .dk = dk, .dv = dv, .initial_state = initial};
          const Inputs in = make_inputs(layout, d, dtype, seed++);
          const std::string label = label_of(layout, d, dtype);
          const Result fused = run(Form::Fused, in);
          const double tol = tolerance(dtype);
          const double ec = compare(fused, run(Form::Chunked, in), tol, label + " vs chunked");
          const double er = compare(fused, run(Form::Recurrent, in), tol, label + " vs recurrent");
          (dtype == kFloat64 ? chunked64 : chunked32).update(ec, label);
          (dtype == kFloat64 ? recurrent64 : recurrent32).update(er, label);
        }
  chunked64.print("largest fused-vs-chunked relative error, float64");
  recurrent64.print("largest fused-vs-recurrent relative error, float64");
  chunked32.print("largest fused-vs-chunked relative error, float32");
  recurrent32.print("largest fused-vs-recurrent relative error, float32");
}

// float32 against the float64 recurrence: the fused kernel's own float32 accuracy.
TEST(GatedScan, Float32IsAccurate) {
  Worst worst;
  uint64_t seed = 500;
  for (const Layout& layout : kLayouts) {
    const Draw d{.B = 1, .T = 200, .dk = 16, .dv = 16};
    const Inputs in64 = make_inputs(layout, d, kFloat64, seed);
    const Inputs in32 = make_inputs(layout, d, kFloat32, seed++);
    const Result f32 = run(Form::Fused, in32), ref = run(Form::Recurrent, in64);
    Result f32_as_64{to(f32.out, kFloat64), to(f32.final_state, kFloat64), {}};
    for (const Tensor& g : f32.grads) f32_as_64.grads.push_back(to(g, kFloat64));
    worst.update(compare(f32_as_64, ref, 1e-5, std::string(layout.name) + " float32 vs float64"), layout.name);
  }
  worst.print("largest float32-fused vs float64-recurrent relative error (T=200, 16x16 state)");
}

TEST(GatedScan, ExtremeDecays) {
  // At the gate floor (-20: the state forgets everything at every step, exp(-20) ~ 2e-9) and
  // near 0 (it forgets nothing), over more than one chunk.
  Worst worst;
  uint64_t seed = 300;
  for (const Layout& layout : kLayouts)
    for (auto [low, high] : {std::pair{-20.0, -19.9}, std::pair{-1e-6, -1e-7}})
      for (DType dtype : {kFloat64, kFloat32}) {
        const Draw d{.T = 70, .decay_low = low, .decay_high = high};
        const Inputs in = make_inputs(layout, d, dtype, seed++);
        const std::string label = label_of(layout, d, dtype) + " decays in [" + std::to_string(low) + ", " +
                                  std::to_string(high) + "]";
        const Result fused = run(Form::Fused, in);
        worst.update(compare(fused, run(Form::Recurrent, in), tolerance(dtype), label + " vs recurrent"), label);
        compare(fused, run(Form::Chunked, in), tolerance(dtype), label + " vs chunked");
      }
  worst.print("largest fused-vs-recurrent relative error with extreme decays");
}

TEST(GatedScan, ClosedGatesGiveFiniteValuesAndZeroDecayGradients) {
  // A log decay of -inf (a gate exactly closed) empties the state: exp gives 0, and the decay's
  // gradient G * P is 0, not NaN.
  const Draw d{.B = 1, .H = 1, .T = 9, .dk = 3, .dv = 2};
  Inputs in = make_inputs({"both", Decay::PerChannel, Decay::PerChannel}, d, kFloat64, 7);
  Tensor gk = detach(in.gk), gv = detach(in.gv);
  copy_(gk, full({1, 1, 9, 3}, -std::numeric_limits<double>::infinity()));
  in.gk = gk.requires_grad_();
  in.gv = gv.requires_grad_();
  const Result fused = run(Form::Fused, in);
  for (const Tensor& t : {fused.out, fused.final_state}) EXPECT_TRUE(std::isfinite(sum(abs(t)).item()));
  EXPECT_EQ(max_abs_diff(fused.grads[3], zeros_like(fused.grads[3])), 0.0) << "dgk";
  EXPECT_EQ(max_abs_diff(fused.grads[4], zeros_like(fused.grads[4])), 0.0) << "dgv";
  // With every key channel closed, S_t = v_t k_t^T: the output is that of one step.
  const Tensor expected = sum(in.q * in.k, {-1}, true) * in.v;
  EXPECT_LT(max_abs_diff(fused.out, expected), 1e-12);
}

TEST(GatedScan, NonContiguousInputs) {
  // The layers' layout: (B, T, H, d) projections permuted to (B, H, T, d); and decays read with a
  // step along the channel dim.
  Generator gen(11);
  const int64_t B = 2, T = 70, H = 3, dk = 4, dv = 6;
  for (DType dtype : {kFloat64, kFloat32}) {
    auto bthd = [&](int64_t d, double lo, double hi) {
      return permute(uniform({B, T, H, d}, lo, hi, dtype, &gen), {0, 2, 1, 3}).requires_grad_();
    };
    Inputs in{bthd(dk, -1, 1), bthd(dk, -1, 1), bthd(dv, -1, 1), Tensor(), Tensor(), Tensor()};
    in.gk = slice(uniform({B, H, T, 2 * dk}, -1, -0.01, dtype, &gen), 3, 0, 2 * dk, 2).requires_grad_();
    in.gv = bthd(dv, -1, -0.01);
    in.s0 = transpose(randn({B, H, dk, dv}, dtype, &gen), 2, 3).requires_grad_();
    for (const Tensor& x : in.differentiable()) EXPECT_FALSE(x.is_contiguous());
    const std::string label = std::string("strided ") + dtype_name(dtype);
    compare(run(Form::Fused, in), run(Form::Recurrent, in), tolerance(dtype), label);
  }
}

TEST(GatedScan, EmptyShapes) {
  // The composite forms cannot backpropagate through nothing, so the expected values are written
  // out: with T = 0, S_T = S_0 (zeros without one) and its gradient passes straight through; with
  // no batch, no key dim (o = S q = 0) or no value dim, everything is a sum over nothing.
  const Layout both{"both", Decay::PerChannel, Decay::PerChannel};
  const Draw empty_draws[] = {{.T = 0}, {.T = 0, .initial_state = false}, {.B = 0}, {.dk = 0}, {.dv = 0}};
  for (const Draw& d : empty_draws) {
    const std::string label = "B=" + std::to_string(d.B) + " T=" + std::to_string(d.T) + " dk=" + std::to_string(d.dk) +
                              " dv=" + std::to_string(d.dv) + (d.initial_state ? " s0" : "");
    const Inputs in = make_inputs(both, d, kFloat64, 4);
    const ScanResult r = gated_linear_scan_with_state(in.q, in.k, in.v, in.gk, in.gv, in.s0);
    EXPECT_EQ(r.out.shape(), Shape({d.B, d.H, d.T, d.dv})) << label;
    EXPECT_EQ(max_abs_diff(r.out, zeros_like(r.out)), 0.0) << label;
    const Tensor s_expected = d.T == 0 && in.s0.defined() ? in.s0 : zeros_like(r.final_state);
    EXPECT_EQ(max_abs_diff(r.final_state, s_expected), 0.0) << label;
    Generator gen(2);
    const Tensor r_s = randn(r.final_state.shape(), kFloat64, &gen);
    const auto g = grad(sum(r.out) + sum(r.final_state * r_s), in.differentiable(), Tensor(), false, true);
    for (size_t i = 0; i < g.size(); ++i) {
      const bool is_s0 = in.s0.defined() && i + 1 == g.size();
      const Tensor expected = is_s0 && d.T == 0 ? r_s : zeros_like(in.differentiable()[i]);
      ASSERT_TRUE(g[i].defined()) << label << " input " << i;
      EXPECT_EQ(g[i].shape(), in.differentiable()[i].shape()) << label << " input " << i;
      EXPECT_EQ(max_abs_diff(g[i], expected), 0.0) << label << " input " << i;
    }
  }
}

TEST(GatedScan, OnlyTheWantedGradientsAndOutputsAgree) {
  // The plain op (no final state) and gradients for a subset of the inputs.
  const Inputs in = make_inputs({"both", Decay::PerChannel, Decay::PerChannel}, {.T = 40}, kFloat64, 5);
  const Tensor o = gated_linear_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0);
  const Tensor o_ref = recurrent_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0);
  EXPECT_LE(relative_error(o, o_ref), 1e-12);
  Generator gen(1);
  const Tensor r = randn(o.shape(), kFloat64, &gen);
  const auto g = grad(sum(o * r), {in.gv, in.k});
  const auto g_ref = grad(sum(o_ref * r), {in.gv, in.k});
  for (size_t i = 0; i < g.size(); ++i) EXPECT_LE(relative_error(g[i], g_ref[i]), 1e-10) << "gradient " << i;
  // No gradient wanted: no graph.
  NoGradGuard no_grad;
  EXPECT_FALSE(gated_linear_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0).requires_grad());
}

TEST(GatedScan, ScanDispatchesOnTheOption) {
  const Inputs in = make_inputs({"value", Decay::None, Decay::PerChannel}, {.T = 50}, kFloat64, 6);
  nn::linear::ScanOptions composite;
  composite.kernel = nn::linear::ScanKernel::Composite;
  Tensor s_composite;
  const Tensor o_composite = nn::linear::scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, &s_composite, composite);
  for (nn::linear::ScanKernel kernel : {nn::linear::ScanKernel::Chunked, nn::linear::ScanKernel::Sequential}) {
    nn::linear::ScanOptions fused;
    fused.kernel = kernel;
    Tensor s_fused;
    const Tensor o_fused = nn::linear::scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, &s_fused, fused);
    EXPECT_LE(relative_error(o_fused, o_composite), 1e-10);
    EXPECT_LE(relative_error(s_fused, s_composite), 1e-10);
  }
  EXPECT_EQ(nn::linear::scan(in.q, in.k, in.v, in.gk, in.gv).grad_fn()->name(), "gated_linear_scan");
  EXPECT_EQ(nn::linear::parse_scan_kernel("sequential"), nn::linear::ScanKernel::Sequential);
  EXPECT_LINEA_ERROR(nn::linear::parse_scan_kernel("fast"), "scan", "unknown scan kernel 'fast'", "chunked");
  EXPECT_LINEA_ERROR(nn::linear::scan(in.q, in.k, transpose(in.v, 2, 3), in.gk, in.gv), "scan", "v");
}

TEST(GatedScan, LayersAgreeWithTheFusedScanOnAndOff) {
  // ReGLA (a per-channel value decay and the running key max's scalar one) and GLA (a per-channel
  // key decay) as layers: forward and the gradients of every parameter.
  namespace L = nn::linear;
  for (L::LinearAttentionPreset preset : {L::LinearAttentionPreset::Regla, L::LinearAttentionPreset::Gla,
                                          L::LinearAttentionPreset::LaRelu}) {
    L::LinearAttentionConfig config = L::linear_attention_preset(preset, 16, 2, 8);
    Generator gen_a(1), gen_b(1), gen_x(2);
    config.scan.kernel = L::ScanKernel::Chunked;
    L::LinearAttention fused(config, gen_a);
    config.scan.kernel = L::ScanKernel::Composite;
    L::LinearAttention composite(config, gen_b);
    const Tensor x = randn({2, 70, 16}, kFloat64, &gen_x);
    fused.to(kFloat64);
    composite.to(kFloat64);
    const Tensor y_fused = fused.forward(x), y_composite = composite.forward(x);
    EXPECT_LE(relative_error(y_fused, y_composite), 1e-10) << L::preset_name(preset);
    backward(sum(y_fused * y_fused));
    backward(sum(y_composite * y_composite));
    const auto pf = fused.named_parameters(), pc = composite.named_parameters();
    ASSERT_EQ(pf.size(), pc.size());
    for (size_t i = 0; i < pf.size(); ++i)
      EXPECT_LE(relative_error(pf[i].tensor.grad(), pc[i].tensor.grad()), 1e-9)
          << L::preset_name(preset) << " " << pf[i].name;
  }
}

TEST(GatedScan, ErrorsNameTheOpAndTheShapes) {
  const Inputs in = make_inputs({"both", Decay::PerChannel, Decay::PerChannel}, {.T = 4}, kFloat64, 8);
  EXPECT_LINEA_ERROR(gated_linear_scan(in.q, narrow(in.k, 3, 0, 4), in.v, in.gk, in.gv), "gated_linear_scan", "k");
  EXPECT_LINEA_ERROR(gated_linear_scan(in.q, in.k, narrow(in.v, 2, 0, 3), in.gk, in.gv), "gated_linear_scan", "v");
  EXPECT_LINEA_ERROR(gated_linear_scan(in.q, in.k, in.v, narrow(in.gk, 3, 0, 2), in.gv), "gated_linear_scan", "gk",
                     "one decay per step");
  EXPECT_LINEA_ERROR(gated_linear_scan(in.q, in.k, in.v, in.gk, narrow(in.gv, 3, 0, 2)), "gated_linear_scan", "gv");
  EXPECT_LINEA_ERROR(gated_linear_scan(in.q, in.k, in.v, in.gk, in.gv, transpose(in.s0, 2, 3)), "gated_linear_scan",
                     "initial_state");
  EXPECT_LINEA_ERROR(gated_linear_scan(in.q, to(in.k, kFloat32), in.v, in.gk, in.gv), "gated_linear_scan", "dtype");
  EXPECT_LINEA_ERROR(gated_linear_scan(select(in.q, 0, 0), in.k, in.v, Tensor(), Tensor()), "gated_linear_scan",
                     "(B, H, T, dk)");
}

}  // namespace
}  // namespace linea
