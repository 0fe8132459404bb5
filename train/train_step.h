#pragma once
// One optimizer step: forward and backward over the micro-batches (gradients accumulate, each
// micro-batch's loss scaled by 1/accum), clipping by the global gradient norm, the update. The
// trainer and `linea bench train` both take their steps through here.
//
// The clip is folded into the update (Optimizer::step's grad_scale): the gradients are left as
// backward made them, which saves a pass and a kernel launch per parameter.
#include <vector>

#include "nn/model.h"
#include "train/batcher.h"
#include "train/gradient_sync.h"
#include "train/grad_utils.h"
#include "train/optimizer.h"

namespace linea::train {

struct StepResult {
  double loss = 0.0;        // mean over the micro-batches (and the ranks)
  bool loss_finite = true;  // false: a micro-batch's loss was NaN or Inf (no update was made)
  ClipResult clip;          // the gradients' norm before clipping; not finite: no update was made
  bool stop = false;        // data-parallel: some rank asked to stop after this step
};

// One rank's part of a data-parallel step (train/data_parallel.h): its micro-batches are its rows
// of the global ones; the gradients are averaged over the ranks before clipping, and the loss, its
// finiteness and a stop request are agreed by every rank, so that all take the same decisions.
struct ParallelStep {
  GradientSync& gradients;
  bool stop_requested = false;  // this rank's
};

// clip <= 0 measures the norm without clipping. The batches are moved to device as needed.
StepResult train_step(nn::LanguageModel& model, Optimizer& optimizer, const std::vector<Batch>& micro_batches,
                      double clip, Device device, ParallelStep* parallel = nullptr);

}  // namespace linea::train
