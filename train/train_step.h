#pragma once
// One optimizer step: forward and backward over the micro-batches (gradients accumulate, each
// micro-batch's loss scaled by 1/accum), clipping by the global gradient norm, the update. The
// trainer and `linea bench train` both take their steps through here.
#include <vector>

#include "nn/model.h"
#include "train/batcher.h"
#include "train/grad_utils.h"
#include "train/optimizer.h"

namespace linea::train {

struct StepResult {
  double loss = 0.0;        // mean over the micro-batches
  bool loss_finite = true;  // false: a micro-batch's loss was NaN or Inf (no update was made)
  ClipResult clip;          // the gradients' norm before clipping; not finite: no update was made
};

// clip <= 0 measures the norm without clipping. The batches are moved to device as needed.
StepResult train_step(nn::LanguageModel& model, Optimizer& optimizer, const std::vector<Batch>& micro_batches,
                      double clip, Device device);

}  // namespace linea::train
