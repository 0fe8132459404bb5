#pragma once
// Helpers shared by the tests of the recurrent sequence mixers (DeltaNet, the Griffin block, WQKV
// pooling): run the decoding form over a sequence, compare it with the parallel form in values
// and gradients, check causality, and print the largest differences for the record.
#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_set>
#include <vector>

#include "autograd/node.h"
#include "nn/mixer.h"
#include "tests/test_util.h"

namespace linea::testing {

// step() over every position from init_state, stacked: (B, T, D).
inline Tensor decode_all(nn::SequenceMixer& layer, const Tensor& x) {
  auto state = layer.init_state(x.size(0));
  std::vector<Tensor> outputs;
  for (int64_t t = 0; t < x.size(1); ++t) outputs.push_back(layer.step(select(x, 1, t), *state));
  return stack(outputs, 1);
}

inline bool all_finite(const Tensor& t) {
  for (double v : to(detach(t), kFloat64).to_vector<double>())
    if (!std::isfinite(v)) return false;
  return true;
}

inline double tolerance(DType dtype) { return dtype == kFloat64 ? 1e-9 : 1e-5; }

struct FormDiff {
  double output = 0, gradient = 0;
  std::string worst;  // the input or parameter with the largest gradient difference
  bool finite = true;  // every value and gradient of both forms
  void merge(const FormDiff& d) {
    output = std::max(output, d.output);
    if (d.gradient >= gradient) gradient = d.gradient, worst = d.worst;
    finite = finite && d.finite;
  }
};

// Gradients are compared tensor by tensor, each relative to its own scale, except that a tensor
// whose gradient is tiny next to the layer's largest one is compared at this fraction of that
// largest scale. Such a gradient is what is left after larger terms cancel (it is zero in exact
// arithmetic for d/dq of an output-normed DeltaNet at T = 1, where o_0 is a multiple of v_0, and
// for d/dw of WQKV at T = 1, where every slot holds k_0), so its own digits are rounding noise of
// those terms: about 1e-16 (float64) or 1e-7 (float32) of the largest gradient.
inline double gradient_floor(DType dtype) { return dtype == kFloat64 ? 1e-6 : 1e-2; }

// max |a - b| / max(max |b|, floor): infinite when a is not finite, the plain difference when
// b and the floor are 0.
inline double relative_diff_floored(const Tensor& a, const Tensor& b, double floor) {
  EXPECT_EQ(a.shape(), b.shape());
  const Tensor a64 = to(detach(a), kFloat64), b64 = to(detach(b), kFloat64);
  if (!all_finite(a64)) return INFINITY;
  if (a64.numel() == 0) return 0.0;
  const double diff = max_abs_diff(a64, b64), scale = std::max(max(abs(b64)).item(), floor);
  return scale > 0 ? diff / scale : diff;
}

// max |a - b| / max |b|: the difference relative to the reference's own scale.
inline double relative_diff(const Tensor& a, const Tensor& b) { return relative_diff_floored(a, b, 0.0); }

// Both forms of layer on x (B, T, D) of the layer's dtype: the relative differences of the
// outputs and of the gradients of sum(y * u) (u fixed, random) w.r.t. x and every parameter.
inline FormDiff compare_forms(nn::SequenceMixer& layer, const Tensor& x_values, uint64_t seed = 5) {
  Generator gen(seed);
  const Tensor x = clone(detach(x_values)).requires_grad_();
  const Tensor u = randn(x.shape(), x.dtype(), &gen);
  std::vector<Tensor> inputs{x};
  std::vector<std::string> names{"input"};
  for (const nn::NamedParameter& p : layer.named_parameters()) {
    inputs.push_back(p.tensor);
    names.push_back(p.name);
  }
  const Tensor parallel = layer.forward(x), recurrent = decode_all(layer, x);
  FormDiff d;
  d.output = relative_diff(recurrent, parallel);
  d.finite = all_finite(parallel) && all_finite(recurrent);
  const auto g_par = grad(sum(parallel * u), inputs, Tensor(), false, /*allow_unused=*/true);
  const auto g_rec = grad(sum(recurrent * u), inputs, Tensor(), false, /*allow_unused=*/true);
  double largest = 0.0;
  for (const Tensor& g : g_par)
    if (g.defined() && g.numel() > 0) largest = std::max(largest, max(abs(to(detach(g), kFloat64))).item());
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(g_par[i].defined(), g_rec[i].defined()) << names[i];
    if (!g_par[i].defined() || !g_rec[i].defined()) continue;
    d.finite = d.finite && all_finite(g_par[i]) && all_finite(g_rec[i]);
    const double r = relative_diff_floored(g_rec[i], g_par[i], gradient_floor(x.dtype()) * largest);
    if (r >= d.gradient) d.gradient = r, d.worst = names[i];
  }
  return d;
}

// Expects d within the dtype's tolerance, naming `what`.
inline void expect_forms_agree(const FormDiff& d, DType dtype, const std::string& what) {
  EXPECT_TRUE(d.finite) << what << ": a value or gradient is not finite";
  EXPECT_LE(d.output, tolerance(dtype)) << what << ": outputs";
  EXPECT_LE(d.gradient, tolerance(dtype)) << what << ": gradient of " << d.worst;
}

inline void print_forms(const std::string& what, DType dtype, const FormDiff& d) {
  std::printf("[forms] %-36s %-7s output %.2e  gradient %.2e (%s)\n", what.c_str(), dtype_name(dtype), d.output,
              d.gradient, d.worst.c_str());
}

// The largest relative change of the parallel form's outputs 0..t when every input after t is
// replaced by other values.
inline double causality_violation(nn::SequenceMixer& layer, const Tensor& x, int64_t t, Generator& gen) {
  const int64_t T = x.size(1);
  NoGradGuard no_grad;
  const Tensor other = randn(x.shape(), x.dtype(), &gen);
  const Tensor mixed = cat({narrow(x, 1, 0, t + 1), narrow(other, 1, t + 1, T - t - 1)}, 1);
  return relative_diff(narrow(layer.forward(mixed), 1, 0, t + 1), narrow(layer.forward(x), 1, 0, t + 1));
}

// The number of elements of the largest tensor that the graph behind `roots` holds an edge to:
// what a memory bound of the parallel form is checked against.
inline int64_t largest_tensor_in_graph(const std::vector<Tensor>& roots) {
  int64_t largest = 0;
  std::unordered_set<autograd::Node*> seen;
  std::vector<autograd::Node*> stack;
  for (const Tensor& t : roots) stack.push_back(t.grad_fn().get());
  while (!stack.empty()) {
    autograd::Node* node = stack.back();
    stack.pop_back();
    if (!node || !seen.insert(node).second) continue;
    for (const autograd::Edge& e : node->edges) {
      largest = std::max(largest, numel_of(e.shape));
      stack.push_back(e.node.get());
    }
  }
  return largest;
}

}  // namespace linea::testing
