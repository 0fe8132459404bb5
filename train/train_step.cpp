#include "train/train_step.h"

#include <cmath>

namespace linea::train {

StepResult train_step(nn::LanguageModel& model, Optimizer& optimizer, const std::vector<Batch>& micro_batches,
                      double clip, Device device) {
  StepResult r;
  optimizer.zero_grad();
  const double scale = 1.0 / static_cast<double>(micro_batches.size());
  for (const Batch& b : micro_batches) {
    const Tensor loss = model.loss(to(b.inputs, device), to(b.targets, device));
    const double value = loss.item();
    r.loss += value * scale;
    if (!std::isfinite(value)) {
      r.loss_finite = false;
      return r;
    }
    backward(micro_batches.size() > 1 ? loss * scale : loss);
  }
  const std::vector<Tensor> params = model.parameters();
  r.clip = clip > 0 ? clip_grad_norm(params, clip) : ClipResult{grad_norm(params), true, false};
  r.clip.finite = r.clip.finite && std::isfinite(r.clip.norm);
  if (r.clip.finite) optimizer.step();
  return r;
}

}  // namespace linea::train
