#include "train/train_step.h"

#include <cmath>

#include "autograd/ops.h"

namespace linea::train {

namespace {

// The forward of one micro-batch: its loss, through which backward runs.
Tensor forward(nn::LanguageModel& model, const Batch& b, Device device) {
  return model.loss(to(b.inputs, device), to(b.targets, device));
}

// d(loss * scale) into the gradients; scale is 1 / (micro-batches).
void backward_scaled(const Tensor& loss, double scale, const GradAccumulatedHook& hook = nullptr) {
  backward(scale != 1.0 ? loss * scale : loss, Tensor(), false, hook);
}

// Clipping and the update: the clip's scale goes to the optimizer, which applies it as it reads
// the gradients. A non-finite norm makes no update.
void update(StepResult& r, Optimizer& optimizer, double clip, double norm) {
  r.clip = plan_clip(clip, norm);
  if (r.clip.finite) optimizer.step(r.clip.scale);
}

StepResult plain_step(nn::LanguageModel& model, Optimizer& optimizer, const std::vector<Batch>& micro_batches,
                      double clip, Device device) {
  StepResult r;
  const double scale = 1.0 / static_cast<double>(micro_batches.size());
  Tensor norm_squared;  // the gradients' norm squared, queued behind the last backward
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    Tensor loss_value;
    {
      const Tensor loss = forward(model, micro_batches[i], device);
      // The backward is queued before the loss is read: reading it waits for the forward, and the
      // host would then queue the backward's first kernels onto an idle GPU. A non-finite loss
      // makes non-finite gradients, which no optimizer step takes (below).
      backward_scaled(loss, scale);
      loss_value = detach(loss);
    }  // The graph's nodes are freed here, while the device runs the backward (~0.1 ms of host time).
    // Queued before the loss is read, so that one wait for the device serves both.
    if (i + 1 == micro_batches.size()) norm_squared = grad_norm_squared(model.parameters());
    const double value = loss_value.item();
    r.loss += value * scale;
    if (!std::isfinite(value)) {
      r.loss_finite = false;
      return r;
    }
  }
  update(r, optimizer, clip, read_norm(norm_squared));
  return r;
}

// Every rank makes the same collectives in the same order, whatever its own numbers: a rank whose
// loss is not finite still goes through the step, and the ranks decide together (the mean of
// losses one of which is not finite is not finite either). The host reads the device once, at the
// end: the losses and the stop flag ride in the last gradient bucket (gradient_sync.h), and the
// norm is queued behind the averages.
StepResult parallel_step(nn::LanguageModel& model, Optimizer& optimizer, const std::vector<Batch>& micro_batches,
                         double clip, Device device, ParallelStep& parallel) {
  StepResult r;
  const double scale = 1.0 / static_cast<double>(micro_batches.size());
  std::vector<Tensor> losses;
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const Tensor loss = forward(model, micro_batches[i], device);
    losses.push_back(detach(loss));
    if (i + 1 < micro_batches.size()) {
      backward_scaled(loss, scale);
      continue;
    }
    parallel.gradients.share(losses, parallel.stop_requested);
    backward_scaled(loss, scale, parallel.gradients.hook());
  }
  if (micro_batches.empty()) parallel.gradients.share({}, parallel.stop_requested);
  parallel.gradients.finish();
  const Tensor norm_squared = grad_norm_squared(model.parameters());
  const double norm = read_norm(norm_squared);  // the step's wait
  const Agreement agreed = parallel.gradients.agreement();
  for (double loss : agreed.losses) r.loss += loss * scale;
  r.loss_finite = std::isfinite(r.loss);
  r.stop = agreed.stop;
  if (r.loss_finite) update(r, optimizer, clip, norm);
  return r;
}

}  // namespace

StepResult train_step(nn::LanguageModel& model, Optimizer& optimizer, const std::vector<Batch>& micro_batches,
                      double clip, Device device, ParallelStep* parallel) {
  optimizer.zero_grad();
  return parallel ? parallel_step(model, optimizer, micro_batches, clip, device, *parallel)
                  : plain_step(model, optimizer, micro_batches, clip, device);
}

}  // namespace linea::train
