#include "tools/paper/gates_math.h"

#include <cmath>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "nn/linear_attention/gates.h"
#include "tensor/creation.h"
#include "tensor/error.h"

namespace linea::cli::paper {

RefinedGateGradient refined_gate_gradient_closed_form(double g, double r) {
  const double dsigmoid = g * (1 - g);
  return {.forget = 2 * dsigmoid * ((1 - r) * g + r * (1 - g)), .refine = 2 * dsigmoid * r * (1 - r)};
}

double logit(double p) {
  LINEA_CHECK(p > 0 && p < 1, "paper.gates", "logit of ", p, " (needs 0 < p < 1)");
  return std::log(p) - std::log1p(-p);
}

std::vector<RefinedGateGradient> refined_gate_gradient_autograd(const std::vector<double>& a,
                                                                const std::vector<double>& c) {
  LINEA_CHECK(a.size() == c.size() && !a.empty(), "paper.gates", "need as many forget as refine pre-activations, got ",
              a.size(), " and ", c.size());
  const int64_t n = static_cast<int64_t>(a.size());
  Tensor ta = from_vector(a, {n}), tc = from_vector(c, {n});
  ta.requires_grad_();
  tc.requires_grad_();
  // The layer keeps the gate in log space; F itself is its exp. Each F_i depends on a_i and c_i
  // only, so the gradient of sum(F) is the elementwise dF/da, dF/dc.
  backward(sum(exp(nn::linear::refined_log_gate(ta, tc))));
  const std::vector<double> da = ta.grad().to_vector<double>(), dc = tc.grad().to_vector<double>();
  std::vector<RefinedGateGradient> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = {da[i], dc[i]};
  return out;
}

std::vector<double> sigmoid_gate_gradient_autograd(const std::vector<double>& a) {
  Tensor ta = from_vector(a, {static_cast<int64_t>(a.size())});
  ta.requires_grad_();
  backward(sum(sigmoid(ta)));
  return ta.grad().to_vector<double>();
}

}  // namespace linea::cli::paper
