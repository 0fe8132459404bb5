#include "train/batcher.h"

#include <algorithm>
#include <string>
#include <vector>

#include "tensor/creation.h"
#include "tensor/error.h"
#include "tensor/number_text.h"
#include "tensor/random.h"

namespace linea::train {

namespace {

void check_shape(const char* who, std::span<const int64_t> tokens, int64_t batch_size, int64_t context) {
  LINEA_CHECK(batch_size > 0 && context > 0, who, "batch size ", batch_size, " and context ", context,
              " must be positive");
  LINEA_CHECK(static_cast<int64_t>(tokens.size()) >= 2, who, "a split of ", tokens.size(),
              " tokens has nothing to predict (it needs at least 2)");
}

// rows windows of length T starting at starts[r]: inputs tokens[s, s+T), targets tokens[s+1, s+T+1).
Batch gather(std::span<const int64_t> tokens, const int64_t* starts, int64_t rows, int64_t T) {
  Batch batch{empty({rows, T}, kInt64), empty({rows, T}, kInt64)};
  int64_t* inputs = batch.inputs.data<int64_t>();
  int64_t* targets = batch.targets.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < T; ++t) {
      inputs[r * T + t] = tokens[starts[r] + t];
      targets[r * T + t] = tokens[starts[r] + t + 1];
    }
  return batch;
}

uint64_t parse_uint64(const json::Value& value, std::string_view key, std::string_view context) {
  const std::string text = json::get<std::string>(value, key, context);
  uint64_t parsed = 0;
  LINEA_CHECK(parse_whole_number(text, parsed) == std::errc(), "batcher_state", context, " key '", key,
              "': expected a decimal uint64 string, got '", text, "'");
  return parsed;
}

}  // namespace

json::Value to_json(const BatcherState& state) {
  json::Value out;
  out["seed"] = std::to_string(state.seed);
  out["offset"] = std::to_string(state.offset);
  out["batches_drawn"] = state.batches_drawn;
  out["batch_size"] = state.batch_size;
  out["context"] = state.context;
  return out;
}

BatcherState batcher_state_from_json(const json::Value& value, std::string_view context) {
  return {parse_uint64(value, "seed", context), parse_uint64(value, "offset", context),
          json::get<int64_t>(value, "batches_drawn", context), json::get<int64_t>(value, "batch_size", context),
          json::get<int64_t>(value, "context", context)};
}

RandomBatcher::RandomBatcher(std::span<const int64_t> tokens, int64_t batch_size, int64_t context, uint64_t seed)
    : tokens_(tokens), batch_size_(batch_size), context_(context), seed_(seed) {
  check_shape("RandomBatcher", tokens, batch_size, context);
  LINEA_CHECK(static_cast<int64_t>(tokens.size()) > context, "RandomBatcher", "a context of ", context,
              " needs more than ", context, " tokens, but the split has ", tokens.size(),
              "; use a shorter context or more text");
}

Batch RandomBatcher::next() {
  Generator generator(seed_);
  generator.set_offset(offset_);
  const int64_t positions = static_cast<int64_t>(tokens_.size()) - context_;
  const Tensor starts = randint(0, positions, {batch_size_}, kCPU, &generator);
  offset_ = generator.offset();
  ++batches_drawn_;
  return gather(tokens_, starts.data<int64_t>(), batch_size_, context_);
}

BatcherState RandomBatcher::state() const { return {seed_, offset_, batches_drawn_, batch_size_, context_}; }

void RandomBatcher::restore(const BatcherState& state) {
  LINEA_CHECK(state.batch_size == batch_size_ && state.context == context_, "RandomBatcher",
              "the saved state was drawn with batch size ", state.batch_size, " and context ", state.context,
              ", this batcher uses ", batch_size_, " and ", context_, "; a resumed run must keep both");
  seed_ = state.seed;
  offset_ = state.offset;
  batches_drawn_ = state.batches_drawn;
}

EvalBatches::EvalBatches(std::span<const int64_t> tokens, int64_t batch_size, int64_t context)
    : tokens_(tokens), batch_size_(batch_size), context_(context) {
  check_shape("EvalBatches", tokens, batch_size, context);
  full_windows_ = num_targets() / context;
  full_batches_ = (full_windows_ + batch_size - 1) / batch_size;
  remainder_ = num_targets() % context;
}

Batch EvalBatches::operator[](int64_t i) const {
  LINEA_CHECK(i >= 0 && i < size(), "EvalBatches", "batch ", i, " of ", size());
  if (i == full_batches_) {
    const int64_t start = full_windows_ * context_;
    return gather(tokens_, &start, 1, remainder_);
  }
  const int64_t rows = std::min(batch_size_, full_windows_ - i * batch_size_);
  std::vector<int64_t> starts(rows);
  for (int64_t r = 0; r < rows; ++r) starts[r] = (i * batch_size_ + r) * context_;
  return gather(tokens_, starts.data(), rows, context_);
}

}  // namespace linea::train
