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
#include <cstdio>
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
};

// Messages (progress, evaluations, the sample) go to `out`; the JSONL log to options.out/log.jsonl.
TrainResult train_model(const TrainOptions& options, std::FILE* out = stderr);

}  // namespace linea::train
