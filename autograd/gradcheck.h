#pragma once
// Numerical gradient checking, as a library feature: compares the analytic derivatives autograd
// computes for an arbitrary function against central finite differences in float64.
//
//   auto r = gradcheck::check([](const std::vector<Tensor>& x) { return tanh(matmul(x[0], x[1])); },
//                             {randn({3, 4}, kFloat64), randn({4, 2}, kFloat64)});
//   if (!r.passed) std::cerr << r.detail;
//
// What is compared:
//   * vector-Jacobian products u^T J for random cotangents u (what backward computes), entry by
//     entry when the inputs are small, else along random input directions v (u^T J v);
//   * for small functions, the whole Jacobian, one backward per output element.
// Finite differences: (f(x + eps e_j) - f(x - eps e_j)) / (2 eps). Inputs near a kink (relu at 0,
// abs at 0, ties in max) must be avoided by the caller: pick inputs at least ~1e-3 away.
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace linea::gradcheck {

struct Options {
  double eps = 1e-6;        // finite-difference step
  double tolerance = 1e-6;  // largest accepted error (see Result::worst_error)
  int cotangents = 2;       // random cotangents u for the VJP check
  int directions = 3;       // random directions v per cotangent when inputs are large
  int64_t max_perturbed = 600;       // inputs with more elements in all are checked along directions
  int64_t max_jacobian_entries = 20000;  // full Jacobian check when numel_out * numel_in is at most this
  uint64_t seed = 20240601;
};

struct Result {
  bool passed = false;
  // Largest |analytic - numeric| / max(1, |numeric|) over every compared value: a relative error
  // for values above 1 and an absolute one below, so round-off near zero does not count as error.
  double worst_error = 0.0;
  int64_t compared = 0;      // number of values compared
  std::string detail;        // where the worst error occurred, or why the check could not run
};

using Function = std::function<Tensor(const std::vector<Tensor>&)>;

// inputs must be float64 (any layout, any device); they are copied, never modified. f must return
// a float64 tensor and be deterministic (a dropout case must reseed its generator inside f).
Result check(const Function& f, const std::vector<Tensor>& inputs, const Options& options = {});

}  // namespace linea::gradcheck
