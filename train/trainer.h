#pragma once
// The training loop of `linea train`, end to end:
//
//   corpus + tokenizer -> model (from the layer pattern) -> AdamW or SGD with warmup + cosine /
//   linear / constant learning rate, gradient accumulation and clipping by global norm -> periodic
//   validation -> checkpoints (atomic, checksummed) -> final validation and test perplexity and a
//   generated sample.
//
// Runs are deterministic: one seed fixes the initial weights, the batches, the dropout masks and
// the sample, and --resume continues from the latest checkpoint so that the losses that follow are
// bitwise those of an uninterrupted run. A NaN or Inf loss or gradient stops training with an
// Error; the last checkpoint, written before, stays as it was.
//
// A run can also be asked to stop (`linea train` asks on Ctrl-C or SIGTERM): the step in progress
// finishes, a periodic evaluation in progress is abandoned at its next batch, a checkpoint of the
// last completed step is written, and train_model returns with `stopped` set. `--resume` then
// continues exactly as if nothing had happened.
#include <cstdio>
#include <functional>
#include <string>

#include "train/train_options.h"

namespace linea::train {

struct TrainResult {
  int64_t steps = 0;          // steps completed, counting those before a resume
  double valid_loss = 0, valid_ppl = 0;
  double test_loss = 0, test_ppl = 0;
  double seconds = 0;         // wall-clock time of this invocation
  double tokens_per_s = 0;    // training throughput of this invocation
  int64_t parameters = 0;
  std::string sample;
  std::string checkpoint;     // the final checkpoint's directory
  // stop_requested ended the run early: `checkpoint` holds step `steps` (possibly fewer than
  // --steps), and the losses, perplexities and sample were not computed.
  bool stopped = false;
};

// Asked between training steps and between evaluation batches; true stops the run (above). It
// is called often, so it must be cheap: `linea train` reads an atomic flag set by its signal
// handler (tools/stop_signals.h). The first call comes once the corpus is read and the model
// built, right before the first step: nothing is worth saving before it.
using StopRequested = std::function<bool()>;

// Messages (progress, evaluations, the sample) go to `out`; the JSONL log to options.out/log.jsonl.
TrainResult train_model(const TrainOptions& options, std::FILE* out = stderr, const StopRequested& stop_requested = {});

}  // namespace linea::train
