#pragma once
// Batches of (input, target) windows cut from a split's token ids. Targets are the inputs shifted
// by one: target[b][t] = tokens[start_b + t + 1], the token that follows input[b][t].
//
// Both batchers view the ids through a std::span: the tokens (a Corpus's split) must outlive them.
// Batches are Int64 tensors on the CPU; moving them to a device is the trainer's business.
#include <cstdint>
#include <span>

#include "nn/json.h"
#include "tensor/tensor.h"

namespace linea::train {

struct Batch {
  Tensor inputs;   // (B, T) int64
  Tensor targets;  // (B, T) int64
};

// Everything a resumed run needs to draw the batches the interrupted run would have drawn next.
struct BatcherState {
  uint64_t seed = 0;
  uint64_t offset = 0;         // position in the Philox stream of `seed` (tensor/random.h)
  int64_t batches_drawn = 0;   // informational: how many next() calls led here
  int64_t batch_size = 0;      // restore() refuses a state drawn with another shape
  int64_t context = 0;
};

// For checkpoints (train/checkpoint.h keeps it as TrainerState::data). seed and offset are uint64,
// beyond JSON's exact integers, so they travel as decimal strings.
json::Value to_json(const BatcherState& state);
// context names the value in errors ("checkpoint trainer.json data").
BatcherState batcher_state_from_json(const json::Value& value, std::string_view context);

// Training batches: each row starts at a position drawn uniformly from [0, n - T - 1], from a
// seeded linea::Generator, so the same seed gives the same batches on every run and machine.
class RandomBatcher {
 public:
  RandomBatcher(std::span<const int64_t> tokens, int64_t batch_size, int64_t context, uint64_t seed);

  Batch next();

  BatcherState state() const;
  void restore(const BatcherState& state);

  int64_t batch_size() const { return batch_size_; }
  int64_t context() const { return context_; }

 private:
  std::span<const int64_t> tokens_;
  int64_t batch_size_, context_;
  // The generator's (seed, offset), kept as plain numbers so the batcher can be copied and moved
  // (a Generator holds a mutex); next() builds a Generator from them for each draw.
  uint64_t seed_, offset_ = 0;
  int64_t batches_drawn_ = 0;
};

// Evaluation batches: the split cut into consecutive non-overlapping windows that together
// predict every token after the first exactly once, so that summing the per-token losses over
// all batches and dividing by num_targets() gives the exact mean loss of the split.
//
// With n tokens there are n - 1 targets: (n - 1) / T full windows, grouped B to a batch (the last
// such batch may have fewer rows), then, when T does not divide n - 1, one final batch of shape
// (1, (n - 1) % T) holding the remainder. Batches can be asked for in any order.
class EvalBatches {
 public:
  EvalBatches(std::span<const int64_t> tokens, int64_t batch_size, int64_t context);

  int64_t size() const { return full_batches_ + (remainder_ > 0 ? 1 : 0); }
  Batch operator[](int64_t i) const;
  int64_t num_targets() const { return static_cast<int64_t>(tokens_.size()) - 1; }

 private:
  std::span<const int64_t> tokens_;
  int64_t batch_size_, context_;
  int64_t full_windows_, full_batches_, remainder_;
};

}  // namespace linea::train
