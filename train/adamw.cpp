#include "train/adamw.h"

#include <cmath>

namespace linea::train {

namespace {
enum Buffer { kExpAvg, kExpAvgSq };
}  // namespace

AdamW::AdamW(std::vector<NamedParameter> params, AdamWOptions options)
    : Optimizer("adamw", std::move(params), options.lr, {"exp_avg", "exp_avg_sq"}), options_(options) {
  const AdamWOptions& o = options_;
  LINEA_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "AdamW", "betas must lie in [0, 1), got ",
              o.beta1, " and ", o.beta2);
  LINEA_CHECK(o.eps > 0 && o.weight_decay >= 0, "AdamW", "eps must be > 0 and weight_decay >= 0, got ", o.eps,
              " and ", o.weight_decay);
}

// Composed from existing ops for now; the CUDA backend brings a fused kernel that reads p, g, m, v
// once instead of through these temporaries.
void AdamW::update(Slot& slot, const Tensor& grad) {
  const AdamWOptions& o = options_;
  Tensor& p = slot.param.tensor;
  Tensor& m = slot.buffers[kExpAvg];
  Tensor& v = slot.buffers[kExpAvgSq];
  const double t = static_cast<double>(slot.updates);

  add_(mul_(m, o.beta1), grad, 1.0 - o.beta1);
  add_(mul_(v, o.beta2), grad * grad, 1.0 - o.beta2);
  const double bias_correction1 = 1.0 - std::pow(o.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(o.beta2, t);
  // The decay uses p before this step's Adam move, as in the formula: shrink first.
  if (slot.param.weight_decay && o.weight_decay != 0) mul_(p, 1.0 - lr() * o.weight_decay);
  const Tensor denom = sqrt(v / bias_correction2) + o.eps;
  add_(p, m / denom, -lr() / bias_correction1);
}

}  // namespace linea::train
