#pragma once
// Loss and perplexity of a model on a split: the mean next-token cross-entropy over every token
// of the split (each predicted exactly once, train/batcher.h EvalBatches), and exp of it.
#include <cstdint>
#include <span>

#include "nn/model.h"

namespace linea::train {

struct EvalResult {
  double loss = 0.0;  // mean cross-entropy, nats per token
  double ppl = 0.0;   // exp(loss)
  int64_t tokens = 0;  // targets evaluated
};

// max_batches > 0 evaluates only the first that many batches (periodic checks during training);
// 0 evaluates the whole split. Runs in eval mode without a graph; restores the training mode.
EvalResult evaluate(nn::LanguageModel& model, std::span<const int64_t> tokens, int64_t batch, int64_t seq,
                    Device device, int64_t max_batches = 0);

}  // namespace linea::train
