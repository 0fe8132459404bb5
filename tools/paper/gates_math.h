#pragma once
// The refined gate of ReGLA (its eq. 16, nn/linear_attention/gates.h) and its gradient:
//   g = sigmoid(a), r = sigmoid(c),  F = (1 - r) g^2 + r (1 - (1 - g)^2) = g (g + 2 r (1 - g))
//   dF/da = 2 g (1 - g) ((1 - r) g + r (1 - g))    against the sigmoid gate's dg/da = g (1 - g)
//   dF/dc = 2 g (1 - g) r (1 - r)
// docs/paper.md derives them. The closed forms are checked against linea's autograd through the
// layer's own composite nn::linear::refined_log_gate.
#include <vector>

namespace linea::cli::paper {

struct RefinedGateGradient {
  double forget = 0;  // dF/da, a the forget gate's pre-activation
  double refine = 0;  // dF/dc, c the refining gate's pre-activation
};

// By hand, as functions of the activations g and r.
RefinedGateGradient refined_gate_gradient_closed_form(double g, double r);
inline double sigmoid_gate_gradient(double g) { return g * (1 - g); }

// By autograd in float64: F = exp(nn::linear::refined_log_gate(a, c)) at the pre-activations
// a[i], c[i] (the same length), backward of sum(F).
std::vector<RefinedGateGradient> refined_gate_gradient_autograd(const std::vector<double>& a,
                                                                const std::vector<double>& c);
// dg/da of sigmoid(a) by autograd in float64.
std::vector<double> sigmoid_gate_gradient_autograd(const std::vector<double>& a);

// The pre-activation whose sigmoid is p (0 < p < 1).
double logit(double p);

}  // namespace linea::cli::paper
