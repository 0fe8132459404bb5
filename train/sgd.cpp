#include "train/sgd.h"

namespace linea::train {

namespace {
// Plain SGD keeps no state; with momentum, one buffer per parameter.
std::vector<std::string> buffer_kinds(const SGDOptions& o) {
  if (o.momentum == 0) return {};
  return {"momentum_buffer"};
}
}  // namespace

SGD::SGD(std::vector<NamedParameter> params, SGDOptions options)
    : OptimizerWith("sgd", std::move(params), options, buffer_kinds(options)) {
  LINEA_CHECK(options.momentum >= 0 && options.weight_decay >= 0, "SGD",
              "momentum and weight_decay must be >= 0, got ", options.momentum, " and ", options.weight_decay);
  LINEA_CHECK(!options.nesterov || options.momentum > 0, "SGD", "Nesterov momentum needs momentum > 0");
}

void SGD::update(Slot& slot, const Tensor& grad, double grad_scale) {
  const SGDOptions& o = options_;
  Tensor& p = slot.param.tensor;
  Tensor d = grad_scale == 1.0 ? grad : grad * grad_scale;
  if (slot.param.weight_decay && o.weight_decay != 0) d = d + p * o.weight_decay;
  if (o.momentum != 0) {
    Tensor& b = slot.buffers[0];
    add_(mul_(b, o.momentum), d);
    d = o.nesterov ? d + b * o.momentum : b;
  }
  add_(p, d, -lr());
}

}  // namespace linea::train
