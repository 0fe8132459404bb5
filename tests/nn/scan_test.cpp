// The gated linear attention scan (nn/linear_attention/scan.h): the chunked (parallel) form against the
// token-by-token recurrence, in values, final states and gradients, over every kind of decay,
// ragged lengths, extreme gates, causality, the memory bound, and finite differences.
#include "nn/linear_attention/scan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/node.h"
#include "tests/nn/scan_inputs.h"
#include "tests/test_util.h"

namespace linea {
namespace {

using nn::linear::chunked_scan;
using nn::linear::recurrent_scan;
using nn::linear::ScanOptions;

using testing::Decay;
using testing::default_log_decay;
using testing::LogDecayDraw;
using Inputs = testing::ScanInputs;

struct Config {
  const char* name;
  Decay key, value;
  bool initial_state;
};

// Every kind of decay the layers use, alone and together, with and without a carried state.
const std::vector<Config>& configs() {
  static const std::vector<Config> all = {
      {"no_decay", Decay::None, Decay::None, false},           // linear attention
      {"scalar_key", Decay::Scalar, Decay::None, false},       // RFA's gate
      {"key", Decay::PerChannel, Decay::None, false},          // GLA
      {"scalar_value", Decay::None, Decay::Scalar, false},     // running-max rescaling
      {"value", Decay::None, Decay::PerChannel, false},        // ReGLA as written
      {"both", Decay::PerChannel, Decay::PerChannel, false},   // Fast Decay
      {"scalar_both", Decay::Scalar, Decay::Scalar, false},
      {"scalar_key_value", Decay::Scalar, Decay::PerChannel, false},
      {"key_scalar_value", Decay::PerChannel, Decay::Scalar, false},
      {"no_decay_initial", Decay::None, Decay::None, true},
      {"value_initial", Decay::None, Decay::PerChannel, true},
      {"both_initial", Decay::PerChannel, Decay::PerChannel, true},
  };
  return all;
}

Inputs make_inputs(const Config& cfg, int64_t T, DType dtype, uint64_t seed,
                   const LogDecayDraw& log_decay = default_log_decay, int64_t B = 2, int64_t H = 2, int64_t dk = 5,
                   int64_t dv = 3) {
  return testing::draw_scan_inputs(cfg.key, cfg.value, cfg.initial_state, {B, H, T, dk, dv}, dtype, seed, log_decay);
}

// max |a - b| / max |b|: the error relative to the reference's scale.
double relative_error(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.shape(), expected.shape());
  const auto a = actual.to_vector<double>(), e = expected.to_vector<double>();
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - e[i]));
    scale = std::max(scale, std::abs(e[i]));
    if (!std::isfinite(a[i])) return INFINITY;
  }
  return scale == 0.0 ? diff : diff / scale;
}

bool all_finite(const Tensor& t) {
  for (double x : t.to_vector<double>())
    if (!std::isfinite(x)) return false;
  return true;
}

double tolerance(DType dtype) { return dtype == kFloat64 ? 1e-9 : 1e-5; }

// The largest chunked-vs-recurrent errors seen by the sweep, printed at its end.
struct Worst {
  double error = 0.0;
  std::string where;
  void update(double e, const std::string& w) {
    if (e > error) error = e, where = w;
  }
};

// o and S_T of both forms agree within the dtype's tolerance; returns the worse of the two errors.
double compare_forms(const Inputs& in, const ScanOptions& options, const std::string& label) {
  Tensor s_chunked, s_recurrent;
  const Tensor o_chunked = chunked_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, &s_chunked, options);
  const Tensor o_recurrent = recurrent_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, &s_recurrent);
  const double tol = tolerance(in.q.dtype());
  const double e_out = relative_error(o_chunked, o_recurrent), e_state = relative_error(s_chunked, s_recurrent);
  EXPECT_LE(e_out, tol) << label << ": outputs";
  EXPECT_LE(e_state, tol) << label << ": final state";
  EXPECT_EQ(o_chunked.dtype(), in.q.dtype()) << label;
  EXPECT_EQ(s_chunked.dtype(), in.q.dtype()) << label;
  return std::max(e_out, e_state);
}

TEST(Scan, ChunkedMatchesRecurrentOverDecaysLengthsAndChunks) {
  Worst worst64, worst32;
  uint64_t seed = 1;
  for (const Config& cfg : configs())
    for (int64_t T : {1, 15, 16, 17, 64, 100, 130})
      for (int64_t C : {16, 32, 64})
        for (DType dtype : {kFloat64, kFloat32}) {
          const Inputs in = make_inputs(cfg, T, dtype, seed++);
          const std::string label = std::string(cfg.name) + " T=" + std::to_string(T) + " C=" + std::to_string(C) +
                                    (dtype == kFloat64 ? " float64" : " float32");
          (dtype == kFloat64 ? worst64 : worst32).update(compare_forms(in, {C, 16}, label), label);
        }
  std::printf("[ scan ] largest chunked-vs-recurrent relative error: float64 %.3g (%s), float32 %.3g (%s)\n",
              worst64.error, worst64.where.c_str(), worst32.error, worst32.where.c_str());
}

TEST(Scan, SubBlockSizesAgree) {
  // Smaller sub-blocks (more, shorter earlier-sub-block products) and one sub-block per chunk.
  uint64_t seed = 100;
  for (const Config& cfg : configs())
    for (ScanOptions options : {ScanOptions{32, 4}, ScanOptions{16, 8}, ScanOptions{8, 8}, ScanOptions{12, 3}})
      compare_forms(make_inputs(cfg, 41, kFloat64, seed++), options,
                    std::string(cfg.name) + " C=" + std::to_string(options.chunk_size) + " L=" +
                        std::to_string(options.sub_block));
}

TEST(Scan, NonContiguousInputs) {
  // Callers project (B, T, H, d) and permute to (B, H, T, d): the chunking views must cope.
  Generator gen(7);
  const int64_t B = 2, T = 37, H = 3, dk = 4, dv = 6;
  auto bthd = [&](int64_t d, double lo, double hi) {
    return permute(uniform({B, T, H, d}, lo, hi, kFloat64, &gen), {0, 2, 1, 3});
  };
  Inputs in{bthd(dk, -1, 1), bthd(dk, -1, 1), bthd(dv, -1, 1), bthd(dk, -1, -0.01), bthd(dv, -1, -0.01), Tensor()};
  compare_forms(in, {16, 8}, "permuted inputs");
}

// d(loss)/d(inputs) of each form for loss = <o, R_o> + <S_T, R_s> with fixed random R.
std::vector<Tensor> gradients(const Inputs& in, bool chunked, const ScanOptions& options) {
  Tensor s;
  const Tensor o = chunked ? chunked_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, &s, options)
                           : recurrent_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, &s);
  Generator gen(99);
  const Tensor r_o = to(randn(o.shape(), kFloat64, &gen), o.dtype());
  const Tensor r_s = to(randn(s.shape(), kFloat64, &gen), s.dtype());
  const Tensor loss = sum(o * r_o) + sum(s * r_s);
  return grad(loss, in.differentiable());
}

TEST(Scan, GradientsMatchRecurrent) {
  double worst = 0.0;
  uint64_t seed = 200;
  for (const Config& cfg : configs())
    for (auto [T, C] : {std::pair<int64_t, int64_t>{17, 16}, {100, 32}, {130, 64}}) {
      const Inputs in = make_inputs(cfg, T, kFloat64, seed++);
      const auto g_chunked = gradients(in, true, {C, 16}), g_recurrent = gradients(in, false, {});
      for (size_t i = 0; i < g_chunked.size(); ++i) {
        const double e = relative_error(g_chunked[i], g_recurrent[i]);
        worst = std::max(worst, e);
        EXPECT_LE(e, 1e-8) << cfg.name << " T=" << T << " C=" << C << ": gradient of input " << i
                           << " of (q, k, v, [gk], [gv], [s0])";
      }
    }
  std::printf("[ scan ] largest chunked-vs-recurrent gradient relative error (float64): %.3g\n", worst);
}

// Log decays of shape (..., T, d): -20 at steps t with t % period < closed, else in [-0.05, -0.01].
Tensor closed_runs(const Shape& shape, Generator& gen, int64_t closed, int64_t period) {
  std::vector<double> v = uniform(shape, -0.05, -0.01, kFloat64, &gen).to_vector<double>();
  const int64_t d = shape.back(), T = shape[shape.size() - 2];
  for (size_t i = 0; i < v.size(); ++i)
    if ((static_cast<int64_t>(i) / d % T) % period < closed) v[i] = -20.0;
  return from_vector(v, shape);
}

// Gates pushed to their limits: log decays near 0 (gates near 1), at the floor of -20 per step
// (gates near 0), and mixes of both (gates that close and open). Nothing may overflow, in values
// or gradients, and the forms must still agree, gradients of the log decays included, although
// at the floor they are tiny (of order e^{-20}): the chunked form sums log decays over exactly the
// steps each exponent spans, so no O(1) terms cancel on the way.
TEST(Scan, ExtremeGates) {
  const std::vector<std::pair<const char*, LogDecayDraw>> draws = {
      {"near_zero", [](const Shape& s, Generator& g) { return uniform(s, -2e-6, -1e-6, kFloat64, &g); }},
      {"floor", [](const Shape& s, Generator&) { return full(s, -20.0, kFloat64); }},
      {"near_floor", [](const Shape& s, Generator& g) { return uniform(s, -20.0, -10.0, kFloat64, &g); }},
      {"exactly_closed_or_open",  // log decay -inf: a gate of exactly 0
       [](const Shape& s, Generator& g) {
         const Tensor closed = gt(rand(s, kFloat64, &g), scalar_tensor(0.7, kFloat64));
         return where(closed, full(s, -INFINITY, kFloat64), uniform(s, -0.05, 0.0, kFloat64, &g));
       }},
      {"floor_or_zero",
       [](const Shape& s, Generator& g) {
         const Tensor closed = gt(rand(s, kFloat64, &g), scalar_tensor(0.5, kFloat64));
         return where(closed, full(s, -20.0, kFloat64), zeros(s, kFloat64));
       }},
      // Runs of closed gates, then open ones (small but not negligible decays): the exponents of
      // the open steps sit after large accumulated log decays, where a difference of prefix sums
      // would lose float32 precision. Runs of 23 steps cross chunk and sub-block boundaries; runs
      // of 4 then 12 close the start of every sub-block of 16.
      {"floor_runs", [](const Shape& s, Generator& g) { return closed_runs(s, g, 23, 46); }},
      {"floor_sub_block_starts", [](const Shape& s, Generator& g) { return closed_runs(s, g, 4, 16); }},
  };
  double worst_value = 0.0, worst_gradient = 0.0, worst_value32 = 0.0;
  uint64_t seed = 300;
  for (const auto& [draw_name, draw] : draws)
    for (const Config& cfg : configs()) {
      if (cfg.key == Decay::None && cfg.value == Decay::None) continue;
      for (DType dtype : {kFloat64, kFloat32}) {
        const Inputs in = make_inputs(cfg, 100, dtype, seed++, draw);
        const std::string label =
            std::string(draw_name) + " " + cfg.name + (dtype == kFloat64 ? " float64" : " float32");
        const double e = compare_forms(in, {64, 16}, label);
        double& worst = dtype == kFloat64 ? worst_value : worst_value32;
        worst = std::max(worst, e);
        const auto g_chunked = gradients(in, true, {64, 16});
        for (const Tensor& g : g_chunked) EXPECT_TRUE(all_finite(g)) << label << ": gradient";
        if (dtype != kFloat64) continue;
        const auto g_recurrent = gradients(in, false, {});
        for (size_t i = 0; i < g_chunked.size(); ++i) {
          const double eg = relative_error(g_chunked[i], g_recurrent[i]);
          worst_gradient = std::max(worst_gradient, eg);
          EXPECT_LE(eg, 1e-9) << label << ": gradient of input " << i << " of (q, k, v, [gk], [gv], [s0])";
        }
      }
    }
  std::printf("[ scan ] extreme gates: largest relative error, float64 values %.3g, float64 gradients %.3g, "
              "float32 values %.3g\n", worst_value, worst_gradient, worst_value32);
}

// Output t depends on inputs 0..t only: rewriting everything after t leaves o_0..o_t unchanged.
TEST(Scan, Causal) {
  double worst = 0.0;
  uint64_t seed = 500;
  for (const Config& cfg : configs()) {
    const int64_t T = 100;
    const Inputs in = make_inputs(cfg, T, kFloat64, seed++);
    const Tensor o = chunked_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, nullptr, {32, 16});
    const Inputs other = make_inputs(cfg, T, kFloat64, seed + 1000);
    for (int64_t t : {0, 7, 15, 16, 31, 40, 63, 64, 98}) {
      // Positions 0..t from `in`, the rest from `other`.
      auto mix = [t, T](const Tensor& a, const Tensor& b) {
        return a.defined() ? detach(cat({narrow(a, 2, 0, t + 1), narrow(b, 2, t + 1, T - t - 1)}, 2)) : a;
      };
      const Tensor o_mixed = chunked_scan(mix(in.q, other.q), mix(in.k, other.k), mix(in.v, other.v),
                                          mix(in.gk, other.gk), mix(in.gv, other.gv), in.s0, nullptr, {32, 16});
      const double e = relative_error(narrow(o_mixed, 2, 0, t + 1), narrow(o, 2, 0, t + 1));
      worst = std::max(worst, e);
      EXPECT_LE(e, 1e-12) << cfg.name << " t=" << t;
    }
  }
  std::printf("[ scan ] causality: largest change of past outputs %.3g\n", worst);
}

// No tensor of the chunked form grows like T x T (or T x C x d): every tensor autograd holds an
// edge to is at most L T (dk + dv + C) elements (L the sub-block), which at T = 4096 is far below
// T x T. The same run, forward and backward, is timed: a T x T x d form would need 4096^2 * 16
// floats (1 GiB) here.
TEST(Scan, LongSequenceStaysLinearInMemory) {
  const int64_t T = 4096, dk = 16, dv = 16;
  const ScanOptions options{64, 16};
  const Config both = {"both", Decay::PerChannel, Decay::PerChannel, true};
  const Inputs in = make_inputs(both, T, kFloat32, 600, default_log_decay, 1, 1, dk, dv);

  const auto start = std::chrono::steady_clock::now();
  Tensor s;
  const Tensor o = chunked_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, &s, options);
  const auto forward_done = std::chrono::steady_clock::now();

  int64_t largest = 0;
  std::unordered_set<autograd::Node*> seen;
  std::vector<autograd::Node*> stack = {o.grad_fn().get(), s.grad_fn().get()};
  while (!stack.empty()) {
    autograd::Node* node = stack.back();
    stack.pop_back();
    if (!node || !seen.insert(node).second) continue;
    for (const autograd::Edge& e : node->edges) {
      largest = std::max(largest, numel_of(e.shape));
      stack.push_back(e.node.get());
    }
  }
  EXPECT_LE(largest, options.sub_block * T * (dk + dv + options.chunk_size));
  EXPECT_LT(largest, T * T / 4);

  backward(sum(o) + sum(s));
  const auto backward_done = std::chrono::steady_clock::now();
  for (const Tensor& x : in.differentiable()) EXPECT_TRUE(all_finite(x.grad()));
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  std::printf("[ scan ] T=%lld dk=dv=%lld C=%lld float32, both decays: forward %.1f ms, backward %.1f ms; "
              "largest tensor in the graph %lld elements (T x T = %lld)\n",
              static_cast<long long>(T), static_cast<long long>(dk), static_cast<long long>(options.chunk_size),
              ms(start, forward_done), ms(forward_done, backward_done), static_cast<long long>(largest),
              static_cast<long long>(T * T));

  // The long run still equals the recurrence (values only: no graph for the 4096 steps).
  NoGradGuard no_grad;
  Tensor s_recurrent;
  const Tensor o_recurrent = recurrent_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, &s_recurrent);
  EXPECT_LE(relative_error(o, o_recurrent), 1e-5);
  EXPECT_LE(relative_error(s, s_recurrent), 1e-5);
}

// The rows of nn/gradcheck_cases_scan.cpp (run by nn_gradcheck_test.cpp) cover every kind of
// decay; this one is the hardest case, spelled out.
TEST(Scan, FiniteDifferences) {
  // Both decays per channel, a carried state, T = 11 over chunks of 4 in sub-blocks of 2.
  Generator gen(11);
  const int64_t B = 1, H = 2, T = 11, dk = 3, dv = 2;
  std::vector<Tensor> x;
  for (int64_t d : {dk, dk, dv}) x.push_back(randn({B, H, T, d}, kFloat64, &gen));
  for (int64_t d : {dk, dv}) x.push_back(uniform({B, H, T, d}, -1.5, -0.05, kFloat64, &gen));
  x.push_back(randn({B, H, dv, dk}, kFloat64, &gen));
  const gradcheck::Result r = gradcheck::check(
      [](const std::vector<Tensor>& in) {
        Tensor s;
        const Tensor o = chunked_scan(in[0], in[1], in[2], in[3], in[4], in[5], &s, {4, 2});
        return cat({flatten(o), flatten(s)}, 0);
      },
      x);
  EXPECT_TRUE(r.passed) << r.detail;
  EXPECT_LE(r.worst_error, 1e-6);
}

TEST(Scan, StepUpdatesStateInPlaceOfTheHandle) {
  // scan_step from no state equals the first output of the sequence, and hands back S_1 = v k^T.
  const Inputs in = make_inputs({"both", Decay::PerChannel, Decay::PerChannel, false}, 1, kFloat64, 700);
  Tensor state;
  const Tensor o = nn::linear::scan_step(select(in.q, 2, 0), select(in.k, 2, 0), select(in.v, 2, 0),
                                         select(in.gk, 2, 0), select(in.gv, 2, 0), state);
  ASSERT_TRUE(state.defined());
  const Tensor v_k = matmul(unsqueeze(select(in.v, 2, 0), -1), unsqueeze(select(in.k, 2, 0), -2));
  EXPECT_TRUE(testing::all_close(state, v_k, 1e-12, 1e-14));
  EXPECT_TRUE(testing::all_close(o, select(chunked_scan(in.q, in.k, in.v, in.gk, in.gv), 2, 0), 1e-12, 1e-14));
}

TEST(Scan, EmptySequence) {
  const Inputs in = make_inputs({"both_initial", Decay::PerChannel, Decay::PerChannel, true}, 0, kFloat64, 800);
  Tensor s;
  const Tensor o = chunked_scan(in.q, in.k, in.v, in.gk, in.gv, in.s0, &s);
  EXPECT_EQ(o.shape(), (Shape{2, 2, 0, 3}));
  EXPECT_TRUE(testing::all_close(s, in.s0, 0, 0));
}

TEST(Scan, BadInputsAreErrors) {
  const Inputs in = make_inputs({"both", Decay::PerChannel, Decay::PerChannel, false}, 8, kFloat64, 900);
  EXPECT_LINEA_ERROR(chunked_scan(in.q, in.k, in.v, narrow(in.gk, 3, 0, 2), in.gv), "chunked_scan", "gk");
  EXPECT_LINEA_ERROR(chunked_scan(in.q, narrow(in.k, 2, 0, 4), in.v, in.gk, in.gv), "chunked_scan", "k");
  EXPECT_LINEA_ERROR(chunked_scan(in.q, in.k, to(in.v, kFloat32), in.gk, in.gv), "chunked_scan", "float32");
  EXPECT_LINEA_ERROR(chunked_scan(in.q, in.k, in.v, in.gk, in.gv, zeros({2, 2, 5, 3}, kFloat64)), "chunked_scan",
                     "state");
  EXPECT_LINEA_ERROR(chunked_scan(in.q, in.k, in.v, in.gk, in.gv, Tensor(), nullptr, {24, 16}), "chunked_scan",
                     "sub_block");
  Tensor state;
  EXPECT_LINEA_ERROR(nn::linear::scan_step(in.q, in.k, in.v, in.gk, in.gv, state), "scan_step", "3 dims");
}

}  // namespace
}  // namespace linea
