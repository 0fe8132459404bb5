#include "train/train_step.h"

#include <cmath>

#include "autograd/ops.h"

namespace linea::train {

namespace {

// The ranks' mean loss, whether every rank's was finite, and whether any asked to stop.
void agree(ParallelStep& parallel, StepResult& r) {
  const std::vector<double> sums = dist::all_reduce_sum(
      parallel.comm, {r.loss, r.loss_finite ? 0.0 : 1.0, parallel.stop_requested ? 1.0 : 0.0});
  r.loss = sums[0] / parallel.comm.size();
  r.loss_finite = sums[1] == 0.0;
  r.stop = sums[2] > 0.0;
}

}  // namespace

StepResult train_step(nn::LanguageModel& model, Optimizer& optimizer, const std::vector<Batch>& micro_batches,
                      double clip, Device device, ParallelStep* parallel) {
  StepResult r;
  optimizer.zero_grad();
  const double scale = 1.0 / static_cast<double>(micro_batches.size());
  std::vector<Tensor> params;
  Tensor norm_squared;  // the gradients' norm squared, queued behind the last backward (alone)
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const Batch& b = micro_batches[i];
    const bool last = i + 1 == micro_batches.size();
    Tensor loss_value;
    {
      const Tensor loss = model.loss(to(b.inputs, device), to(b.targets, device));
      // The backward is queued before the loss is read: reading it waits for the forward, and the
      // host would then queue the backward's first kernels onto an idle GPU. A non-finite loss
      // makes non-finite gradients, which no optimizer step takes (below).
      const Tensor scaled = micro_batches.size() > 1 ? loss * scale : loss;
      if (parallel && last) backward(scaled, Tensor(), false, parallel->gradients.hook());
      else backward(scaled);
      loss_value = detach(loss);
    }  // The graph's nodes are freed here, while the device runs the backward (~0.1 ms of host time).
    if (last) {
      params = model.parameters();
      // Queued before the loss is read, so that one wait for the device serves both.
      if (!parallel) norm_squared = grad_norm_squared(params);
    }
    const double value = loss_value.item();
    r.loss += value * scale;
    if (!std::isfinite(value)) {
      r.loss_finite = false;
      // Alone, stop here. In a data-parallel step every rank must still make the step's
      // collectives, or the others would wait for it forever: go on, and let them agree below.
      if (!parallel) return r;
    }
  }
  if (parallel) {
    parallel->gradients.finish();
    agree(*parallel, r);
    if (!r.loss_finite) return r;
  }
  if (params.empty()) params = model.parameters();  // no micro-batches
  const double norm = norm_squared.defined() ? std::sqrt(norm_squared.item()) : grad_norm(params);
  r.clip = clip_by_norm(params, clip, norm);
  if (r.clip.finite) optimizer.step();
  return r;
}

}  // namespace linea::train
