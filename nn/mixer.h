#pragma once
// The interface of every temporal-mixing layer (softmax attention, linear and gated linear
// attention, DeltaNet, the Griffin recurrent block, WQKV pooling). Each has two forms that must
// agree:
//   forward(x)       the parallel form for training: x (B, T, D) -> (B, T, D), causal: output t
//                    depends on inputs 0..t only;
//   step(x, state)   the decoding form: one token per sequence, x (B, D) -> (B, D), updating a
//                    state. For recurrent layers the state has a fixed size independent of the
//                    number of tokens seen; softmax attention keeps a KV cache.
// Feeding x[:, 0], x[:, 1], ... through step from init_state gives forward(x) (tests/nn check it,
// values and gradients).
//
// Generation joins the two: prefill(x, state) runs a whole prompt through the parallel form (the
// chunked scan, the fused attention) and leaves the state that step() continues from, equal to
// the one step() would have left after the prompt's tokens one by one (tests/nn/prefill_test.cpp).
// stack_states() then puts the states of separate sequences into one batch, so prompts of
// different lengths, each prefilled alone, decode together.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/layers/linear.h"
#include "nn/layers/norm.h"
#include "nn/module.h"

namespace linea::nn {

struct DecodeState {
  virtual ~DecodeState() = default;
  // Where the tensors this state carries live, by name, each with the batch as its first dim
  // (undefined where the state holds nothing yet). Generic code works through them: the default
  // stack_states concatenates them row by row, tests compare two states member by member, a
  // benchmark counts their bytes. A step may write them in place (softmax attention's KV cache,
  // linear attention's fused step): a copy of a handle sees the new values; clone() to keep one.
  virtual std::vector<std::pair<std::string, Tensor*>> members() { return {}; }
  // The same tensors, to read.
  std::vector<std::pair<std::string, Tensor>> tensors() const;
  int64_t position = 0;  // tokens consumed so far (RoPE and caches use it); in a state stacked
                         // from sequences of different lengths, the largest
  // The most tokens this state can hold, once SequenceMixer::reserve has sized it (0: no limit);
  // a step past it is an error.
  virtual int64_t token_limit() const { return 0; }
  // Whether a step may still reallocate this state's memory (a KV cache not yet reserved): a CUDA
  // graph cannot replay such a step.
  virtual bool may_grow() const { return false; }
};

class SequenceMixer : public Module {
 public:
  virtual Tensor forward(const Tensor& x) = 0;
  // Whether forward takes bfloat16 x: every kernel between its products has a bfloat16 version.
  // Under bfloat16 precision a block then hands it bfloat16 activations and it returns float32,
  // its last product writing the residual stream's dtype (nn/precision.h: stream_dtype); the
  // others get float32 and run their products in bfloat16.
  virtual bool takes_bfloat16() const { return false; }
  virtual std::unique_ptr<DecodeState> init_state(int64_t batch) const = 0;
  virtual Tensor step(const Tensor& x, DecodeState& state) = 0;
  // A block's decoding step around this mixer: x + step(norm(x), state), x the block's (B, D)
  // input. A layer whose step begins and ends with products overrides it to fold the norm into
  // the first and the addition into the last (nn/layers/fused_product.h); the default runs them
  // around step().
  virtual Tensor residual_step(const Tensor& x, const Norm& norm, DecodeState& state);
  // The parallel form over x (B, T, D) continuing from state (init_state's, or one that earlier
  // prefills or steps advanced), which it leaves after the T tokens: the outputs (B, T, D) and the
  // state equal those of T calls of step(). A layer whose training forward looks at the whole
  // sequence (ReGLA's global key max) prefills as it decodes, causally.
  virtual Tensor prefill(const Tensor& x, DecodeState& state) = 0;
  // prefill() for a caller that needs the output at the last token only (a model's last layer,
  // whose other outputs feed nothing): (B, 1, D), and the same state. The default narrows
  // prefill()'s; softmax attention attends from the last query alone, linear attention norms and
  // projects the last token's output alone.
  virtual Tensor prefill_last(const Tensor& x, DecodeState& state);
  // A block's mixer half over a prompt: x + prefill(norm(x), state), or with last_only
  // last_token(x) + prefill_last(norm(x), state). x is the caller's own running sum, which nothing
  // else reads (LanguageModel::prefill's): a layer whose output is a product may add it into x's
  // memory (nn/layers/fused_product.h: add_product_into) instead of making a sum of its own, one
  // launch less. The default adds out of place.
  virtual Tensor residual_prefill(const Tensor& x, const Norm& norm, DecodeState& state, bool last_only);
  // One state for the sequences of `rows` (states this layer made, with any batch each), in
  // order: batch = the sum of theirs. They may have seen different numbers of tokens. The
  // default concatenates every tensor of DecodeState::members() along the batch, which suits any
  // state whose size does not depend on the tokens seen.
  virtual std::unique_ptr<DecodeState> stack_states(const std::vector<const DecodeState*>& rows) const;
  // Sizes `state` once for `tokens` in all (those seen and those to come), so that decoding
  // neither allocates nor moves its memory: what a CUDA graph that replays the step needs
  // (train/decode_graph.h). A step past `tokens` is then an error. Nothing to do for a state of
  // fixed size (the default); softmax attention allocates its KV cache here.
  virtual void reserve(DecodeState& state, int64_t tokens) const;
};

// A mixer whose output is one product: an output projection of what the layer mixed (softmax
// attention's o_proj, linear attention's out projection). Its three prefills differ only in which
// tokens reach that projection and in whether the residual is added into the product
// (nn/layers/fused_product.h: add_product_into, one launch less than a product and an addition),
// so they are written here once, around the layer's prefill_mixed.
class OutputProjectedMixer : public SequenceMixer {
 public:
  Tensor prefill(const Tensor& x, DecodeState& state) override;
  // Only the last token's mixed row goes through the projection.
  Tensor prefill_last(const Tensor& x, DecodeState& state) override;
  // The residual added into the projection's product.
  Tensor residual_prefill(const Tensor& x, const Norm& norm, DecodeState& state, bool last_only) override;

 protected:
  // The prompt x (B, T, D) mixed, continuing from `state` (which it advances by the T tokens), up
  // to the output projection's input: (B, T, width), or with last_only the last token's (B, 1, width).
  virtual Tensor prefill_mixed(const Tensor& x, DecodeState& state, bool last_only) = 0;
  virtual const Linear& output_projection() const = 0;
};

// Gives every member of the state that is a view into a larger buffer a storage of its own. The
// parallel forms hand back their last states as views of what they computed for the whole prompt
// (the fused scan's final state shares one buffer with its (B, H, T, dv) output, the conv's with
// its padded input, a windowed KV cache with the prompt's keys), so a prefilled state would hold
// memory that grows with the prompt; every prefill() ends with this, and keeps the fixed size.
void own_storage(DecodeState& state);
// The same for one tensor: t itself when its storage holds nothing else, else a copy.
Tensor with_own_storage(const Tensor& t);

// x (B, T, ...) -> its last token, (B, 1, ...): a view.
Tensor last_token(const Tensor& x);

// Checks that x is (B, T, D) with D = expected, naming the layer in the error.
void check_sequence_input(const Tensor& x, int64_t expected_dim, const char* layer);
// Checks that x is (B, D) with D = expected.
void check_step_input(const Tensor& x, int64_t expected_dim, const char* layer);

// The state as the State this layer's init_state() made, for x's batch when `batched` (a tensor
// member whose first dim is the batch) is given; `use` ("step", "prefill") names the caller.
template <class State>
State& own_state(const Tensor& x, DecodeState& state, const char* layer, const char* use, Tensor State::*batched) {
  auto* s = dynamic_cast<State*>(&state);
  LINEA_CHECK(s != nullptr, layer, use, " needs the state made by this layer's init_state");
  if (batched != nullptr) {
    const Tensor& t = s->*batched;
    LINEA_CHECK(t.defined() && t.size(0) == x.size(0), layer, "the state is for batch ", t.defined() ? t.size(0) : 0,
                " but the input is ", x.describe());
  }
  return *s;
}

// The start of every mixer's step(): x must be (B, D) with D = expected_dim, and state the State
// this layer's init_state() made (for x's batch, with `batched`). Errors name the layer.
template <class State>
State& step_state(const Tensor& x, DecodeState& state, int64_t expected_dim, const char* layer,
                  Tensor State::*batched = nullptr) {
  check_step_input(x, expected_dim, layer);
  return own_state<State>(x, state, layer, "step", batched);
}

// The start of every mixer's prefill(): the same for x (B, T, D) with T >= 1.
template <class State>
State& prefill_state(const Tensor& x, DecodeState& state, int64_t expected_dim, const char* layer,
                     Tensor State::*batched = nullptr) {
  check_sequence_input(x, expected_dim, layer);
  LINEA_CHECK(x.size(1) > 0, layer, "prefill needs at least one token, got ", x.describe());
  return own_state<State>(x, state, layer, "prefill", batched);
}

}  // namespace linea::nn
