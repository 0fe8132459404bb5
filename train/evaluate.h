#pragma once
// Loss and perplexity of a model on a split: the mean next-token cross-entropy over every token
// of the split (each predicted exactly once, train/batcher.h EvalBatches), and exp of it.
#include <cstdint>
#include <functional>
#include <span>

#include "nn/model.h"

namespace linea::train {

struct EvalResult {
  double loss = 0.0;  // mean cross-entropy, nats per token
  double ppl = 0.0;   // exp(loss)
  int64_t tokens = 0;  // targets evaluated
  bool stopped = false;  // stop_requested cut the evaluation short: loss and ppl cover part of it
};

// max_batches > 0 evaluates only the first that many batches (periodic checks during training);
// 0 evaluates the whole split. Runs in eval mode without a graph; restores the training mode.
// stop_requested, when set, is asked before each batch; once it answers true the evaluation ends
// there with `stopped` set (the trainer's Ctrl-C, train/trainer.h).
EvalResult evaluate(nn::LanguageModel& model, std::span<const int64_t> tokens, int64_t batch, int64_t seq,
                    Device device, int64_t max_batches = 0, const std::function<bool()>& stop_requested = {});

}  // namespace linea::train
