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
#include <memory>

#include "nn/module.h"

namespace linea::nn {

struct DecodeState {
  virtual ~DecodeState() = default;
  int64_t position = 0;  // tokens consumed so far (RoPE and caches use it)
};

class SequenceMixer : public Module {
 public:
  virtual Tensor forward(const Tensor& x) = 0;
  virtual std::unique_ptr<DecodeState> init_state(int64_t batch) const = 0;
  virtual Tensor step(const Tensor& x, DecodeState& state) = 0;
};

// Checks that x is (B, T, D) with D = expected, naming the layer in the error.
void check_sequence_input(const Tensor& x, int64_t expected_dim, const char* layer);
// Checks that x is (B, D) with D = expected.
void check_step_input(const Tensor& x, int64_t expected_dim, const char* layer);

// The start of every mixer's step(): x must be (B, D) with D = expected_dim, and state the State
// this layer's init_state() made; with `batched` (a tensor member whose first dim is the batch),
// made for x's batch. Errors name the layer.
template <class State>
State& step_state(const Tensor& x, DecodeState& state, int64_t expected_dim, const char* layer,
                  Tensor State::*batched = nullptr) {
  check_step_input(x, expected_dim, layer);
  auto* s = dynamic_cast<State*>(&state);
  LINEA_CHECK(s != nullptr, layer, "step needs the state made by this layer's init_state");
  if (batched != nullptr) {
    const Tensor& t = s->*batched;
    LINEA_CHECK(t.defined() && t.size(0) == x.size(0), layer, "the state is for batch ", t.defined() ? t.size(0) : 0,
                " but the input is ", x.describe());
  }
  return *s;
}

}  // namespace linea::nn
