#pragma once
// Figure 4's runs: a one-layer model trained from gates pushed to saturation by their bias, and
// the gate activations it computes on the same validation tokens before and after training.
#include <string>
#include <vector>

#include "tools/paper/experiment.h"

namespace linea::cli::paper {

enum class GateUnderStudy { Sigmoid, Refined };
const char* gate_under_study_name(GateUnderStudy gate);  // "sigmoid", "refined"

struct GateRun {
  GateUnderStudy gate;
  double bias = 0;
  std::vector<double> before{}, after{};  // every activation in (0, 1) on the same tokens
  double valid_loss = 0;
  int64_t steps = 0;
};

// Trains `linea train`'s model, one ReGLA layer whose gate is the sigmoid gate (GLA's, the
// paper's comparison; its activation g = sigmoid(a) is recovered from the decay g^(1/tau)) or
// the refined one, both on the key dim, every gate bias set to `bias`.
GateRun train_gate_run(const PaperRun& run, GateUnderStudy gate, double bias);

// Fractions of the values in `bins` equal bins of their logit log(v / (1 - v)) over [-limit, limit]
// (values beyond it counted in the end bins): saturated gates sit at 1e-4 or 1 - 1e-4, which a
// histogram over [0, 1] cannot tell from 0 and 1, while the logit shows every step they move.
std::vector<double> logit_histogram(const std::vector<double>& values, int bins, double limit);

}  // namespace linea::cli::paper
