#include "train/train_step.h"

#include <cmath>

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
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const Batch& b = micro_batches[i];
    const Tensor loss = model.loss(to(b.inputs, device), to(b.targets, device));
    // The backward is queued before the loss is read: reading it waits for the forward, and the
    // host would then queue the backward's first kernels onto an idle GPU. A non-finite loss
    // makes non-finite gradients, which no optimizer step takes (below).
    const Tensor scaled = micro_batches.size() > 1 ? loss * scale : loss;
    const bool last = i + 1 == micro_batches.size();
    if (parallel && last) backward(scaled, Tensor(), false, parallel->gradients.hook());
    else backward(scaled);
    const double value = loss.item();
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
  const std::vector<Tensor> params = model.parameters();
  r.clip = clip > 0 ? clip_grad_norm(params, clip) : ClipResult{grad_norm(params), true, false};
  r.clip.finite = r.clip.finite && std::isfinite(r.clip.norm);
  if (r.clip.finite) optimizer.step();
  return r;
}

}  // namespace linea::train
