#pragma once
// Loss and perplexity of a model on a split: the mean next-token cross-entropy over every token
// of the split (each predicted exactly once, train/batcher.h EvalBatches), and exp of it.
#include <cstdint>
#include <functional>
#include <span>

#include "dist/communicator.h"
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
//
// With comm, the ranks of a data-parallel run share the work: rank r evaluates batches r, r + N,
// ... and the sums are added across ranks, so every rank returns the split's loss; max_batches
// then counts batches of N * batch rows, as one process of that batch would. Every rank must
// call it; stop_requested is not asked then (the ranks could disagree on where to stop).
EvalResult evaluate(nn::LanguageModel& model, std::span<const int64_t> tokens, int64_t batch, int64_t seq,
                    Device device, int64_t max_batches = 0, const std::function<bool()>& stop_requested = {},
                    dist::Communicator* comm = nullptr);

}  // namespace linea::train
