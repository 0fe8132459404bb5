#include "train/adamw.h"

#include <map>
#include <tuple>

#include "autograd/ops.h"

namespace linea::train {

namespace {

enum Buffer { kExpAvg, kExpAvgSq };

}  // namespace

AdamW::AdamW(std::vector<NamedParameter> params, AdamWOptions options)
    : OptimizerWith("adamw", std::move(params), options, {"exp_avg", "exp_avg_sq"}) {
  const AdamWOptions& o = options_;
  LINEA_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "AdamW", "betas must lie in [0, 1), got ",
              o.beta1, " and ", o.beta2);
  LINEA_CHECK(o.eps > 0 && o.weight_decay >= 0, "AdamW", "eps must be > 0 and weight_decay >= 0, got ", o.eps,
              " and ", o.weight_decay);
  for (const NamedParameter& p : parameters()) params_.push_back(p.tensor);
}

// Optimizer::step() calls update() for each parameter with a gradient, in order, and gradients do
// not change during a step: so the first call can tell which parameter comes last, and the last
// call runs the whole step in a few fused kernel calls instead of one chain of ops per tensor.
void AdamW::update(Slot& slot, const Tensor& grad, double grad_scale) {
  const Tensor& p = slot.param.tensor;
  LINEA_CHECK(grad.shape() == p.shape() && grad.dtype() == p.dtype() && grad.device() == p.device(), "AdamW",
              "the gradient of '", slot.param.name, "' is ", grad.describe(), " but the parameter is ", p.describe());
  if (pending_.empty()) {
    last_ = p.impl_ptr();
    for (const Tensor& t : params_)
      if (t.grad().defined()) last_ = t.impl_ptr();
  }
  pending_.push_back({p, grad, slot.buffers[kExpAvg], slot.buffers[kExpAvgSq], slot.param.weight_decay, slot.updates});
  if (p.impl_ptr() == last_) flush(grad_scale);  // one scale for the whole step
}

void AdamW::flush(double grad_scale) {
  const std::vector<Pending> pending = std::move(pending_);  // empty even if a kernel throws
  pending_.clear();
  const AdamWOptions& o = options_;
  // Groups in a fixed order (device, dtype, step), each one adamw_step call.
  using Key = std::tuple<int, int, int, int64_t>;
  std::map<Key, std::vector<const Pending*>> groups;
  for (const Pending& u : pending) {
    const Device d = u.param.device();
    groups[{static_cast<int>(d.kind), d.index, static_cast<int>(u.param.dtype()), u.step}].push_back(&u);
  }
  for (const auto& [key, members] : groups) {
    std::vector<Tensor> params, grads, exp_avg, exp_avg_sq;
    std::vector<bool> decay;
    for (const Pending* u : members) {
      params.push_back(u->param);
      grads.push_back(u->grad);
      exp_avg.push_back(u->exp_avg);
      exp_avg_sq.push_back(u->exp_avg_sq);
      decay.push_back(u->decay && o.weight_decay != 0);
    }
    adamw_step_(params, grads, exp_avg, exp_avg_sq, decay,
                AdamWHyper{lr(), o.beta1, o.beta2, o.eps, o.weight_decay, std::get<3>(key), grad_scale});
  }
}

}  // namespace linea::train
