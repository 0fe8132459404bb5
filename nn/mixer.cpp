#include "nn/mixer.h"

#include <algorithm>
#include <typeinfo>

#include "nn/layers/fused_product.h"

namespace linea::nn {

void check_sequence_input(const Tensor& x, int64_t expected_dim, const char* layer) {
  LINEA_CHECK(x.defined() && x.dim() == 3 && x.size(2) == expected_dim, layer, "expects input (batch, time, ",
              expected_dim, "), got ", x.describe());
}

void check_step_input(const Tensor& x, int64_t expected_dim, const char* layer) {
  LINEA_CHECK(x.defined() && x.dim() == 2 && x.size(1) == expected_dim, layer, "step expects input (batch, ",
              expected_dim, "), got ", x.describe());
}

std::vector<std::pair<std::string, Tensor>> DecodeState::tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  // Only read here (copies of the handles); members() is non-const because stacking writes through it.
  for (const auto& [name, tensor] : const_cast<DecodeState*>(this)->members()) out.emplace_back(name, *tensor);
  return out;
}

Tensor with_own_storage(const Tensor& t) {
  const auto needed = static_cast<size_t>(t.numel()) * dtype_size(t.dtype());
  return t.storage()->nbytes() > needed ? clone(t) : t;
}

void own_storage(DecodeState& state) {
  for (const auto& [name, tensor] : state.members())
    if (tensor->defined()) *tensor = with_own_storage(*tensor);
}

Tensor last_token(const Tensor& x) { return narrow(x, 1, x.size(1) - 1, 1); }

Tensor SequenceMixer::prefill_last(const Tensor& x, DecodeState& state) { return last_token(prefill(x, state)); }

Tensor SequenceMixer::residual_prefill(const Tensor& x, const Norm& norm, DecodeState& state, bool last_only) {
  const Tensor input = norm.forward(x);
  return last_only ? last_token(x) + prefill_last(input, state) : x + prefill(input, state);
}

Tensor OutputProjectedMixer::prefill(const Tensor& x, DecodeState& state) {
  return output_projection().forward(prefill_mixed(x, state, false));
}

Tensor OutputProjectedMixer::prefill_last(const Tensor& x, DecodeState& state) {
  return output_projection().forward(prefill_mixed(x, state, true));
}

Tensor OutputProjectedMixer::residual_prefill(const Tensor& x, const Norm& norm, DecodeState& state, bool last_only) {
  const Tensor mixed = prefill_mixed(norm.forward(x), state, last_only);
  return add_product_into(last_only ? last_token(x) : x, output_projection(), mixed);
}

std::unique_ptr<DecodeState> SequenceMixer::stack_states(const std::vector<const DecodeState*>& rows) const {
  LINEA_CHECK(!rows.empty(), "stack_states", "needs at least one state");
  std::unique_ptr<DecodeState> out = init_state(0);
  auto members = out->members();
  for (const DecodeState* row : rows)
    LINEA_CHECK(row != nullptr && typeid(*row) == typeid(*out), "stack_states",
                "every state must be one this layer's init_state made");
  for (size_t m = 0; m < members.size(); ++m) {
    std::vector<Tensor> parts;
    for (const DecodeState* row : rows)
      if (const Tensor t = row->tensors()[m].second; t.defined()) parts.push_back(t);
    // Undefined in every row (nothing seen yet): stays undefined. In some rows only: such a member
    // has no value that stands for "nothing yet" to pad those rows with.
    if (parts.empty()) *members[m].second = Tensor();
    else {
      LINEA_CHECK(parts.size() == rows.size(), "stack_states", "the state's '", members[m].first,
                  "' is set in some rows and not in others (a row that has seen no token cannot join the others)");
      *members[m].second = cat(parts, 0);
    }
  }
  for (const DecodeState* row : rows) out->position = std::max(out->position, row->position);
  return out;
}

Tensor SequenceMixer::residual_step(const Tensor& x, const Norm& norm, DecodeState& state) {
  return x + step(norm.forward(x), state);
}

void SequenceMixer::reserve(DecodeState& state, int64_t tokens) const {
  LINEA_CHECK(tokens >= state.position, "reserve", "the state has seen ", state.position,
              " tokens already, more than the ", tokens, " asked for");
}

}  // namespace linea::nn
