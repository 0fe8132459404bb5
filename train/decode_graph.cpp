// The graphed decoding step (train/decode_graph.h).
#include "train/decode_graph.h"

#include <algorithm>
#include <exception>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "tensor/device_runtime.h"

namespace linea::train {

namespace {

using State = nn::LanguageModel::State;

// Every tensor member of every layer's state, in a fixed order, as places to read and write.
std::vector<Tensor*> member_slots(State& state) {
  std::vector<Tensor*> slots;
  for (auto& layer : state.layers)
    for (auto& [name, tensor] : layer->members()) slots.push_back(tensor);
  return slots;
}

// "layer 2's key_max", for the reason a capture is refused.
std::vector<std::string> member_names(State& state) {
  std::vector<std::string> names;
  for (size_t i = 0; i < state.layers.size(); ++i)
    for (auto& [name, tensor] : state.layers[i]->members()) names.push_back("layer " + std::to_string(i) + "'s " + name);
  return names;
}

std::string shape_text(const Tensor& t) { return t.defined() ? t.describe() : "nothing"; }

// Where the step leaves a state tensor with another shape than it found it (or defines one it
// did not have), the first such member; empty when every member keeps its shape. Found on a copy
// of the state, so that `state` is not advanced.
std::string first_reshaped_member(nn::LanguageModel& model, State& state, int64_t batch, Device device) {
  State copy = model.init_state(batch);
  const std::vector<Tensor*> from = member_slots(state), to = member_slots(copy);
  for (size_t i = 0; i < from.size(); ++i) *to[i] = from[i]->defined() ? clone(*from[i]) : Tensor();
  for (size_t i = 0; i < state.layers.size(); ++i) copy.layers[i]->position = state.layers[i]->position;
  copy.position = state.position;
  int64_t limit = 0;  // a reserved state is sized once; its copy must be too, or it would grow
  for (const auto& layer : state.layers) limit = std::max(limit, layer->token_limit());
  if (limit > 0) model.reserve(copy, limit);
  model.step(zeros({batch}, {kInt64, device}), copy);  // also warms up cuBLAS and the allocator
  const std::vector<std::string> names = member_names(state);
  for (size_t i = 0; i < from.size(); ++i) {
    const bool same = from[i]->defined() == to[i]->defined() && (!from[i]->defined() || from[i]->shape() == to[i]->shape());
    if (!same)
      return names[i] + " goes from " + shape_text(*from[i]) + " to " + shape_text(*to[i]) + " in one step";
  }
  return "";
}

// The host-side counters of a state, to put back after a capture (which advanced them without
// running anything).
struct Positions {
  int64_t model = 0;
  std::vector<int64_t> layers;
  explicit Positions(const State& s) : model(s.position) {
    for (const auto& layer : s.layers) layers.push_back(layer->position);
  }
  void restore(State& s) const {
    s.position = model;
    for (size_t i = 0; i < layers.size(); ++i) s.layers[i]->position = layers[i];
  }
};

}  // namespace

std::unique_ptr<DecodeGraph> DecodeGraph::capture(nn::LanguageModel& model, State& state, int64_t batch,
                                                  Device device, std::string* why_not,
                                                  std::optional<SamplingParams> draw) {
  auto refuse = [&](const std::string& why) {
    if (why_not) *why_not = why;
    return std::unique_ptr<DecodeGraph>();
  };
  if (!device.is_cuda()) return refuse("graphs are a CUDA feature; " + device.str() + " decodes eagerly");
  NoGradGuard no_grad;
  for (size_t i = 0; i < state.layers.size(); ++i)
    if (state.layers[i]->may_grow())
      return refuse("layer " + std::to_string(i) + "'s KV cache may still grow, which a graph cannot replay " +
                    "(reserve the state first: LanguageModel::reserve)");
  if (const std::string reshaped = first_reshaped_member(model, state, batch, device); !reshaped.empty())
    return refuse("the decoding state changes shape (" + reshaped + "), which a graph cannot replay");

  std::unique_ptr<DecodeGraph> graph(new DecodeGraph(state));
  graph->draw_ = draw;
  for (Tensor* slot : member_slots(state)) {
    if (slot->defined() && !slot->is_contiguous()) *slot = contiguous(*slot);  // copied over in place below
    graph->inputs_.push_back(*slot);
  }
  // The ids a replay reads; with a draw, also the second buffer the two graphs take turns with and
  // the uniforms (a graph without one never touches them).
  graph->ids_[0] = zeros({batch}, {kInt64, device});
  if (draw) {
    graph->ids_[1] = zeros({batch}, {kInt64, device});
    graph->u_ = zeros({batch}, {kFloat64, device});
  }
  const Positions positions(state);
  try {
    for (int k = 0; k < (draw ? 2 : 1); ++k) {
      graph->record(model, k);
      positions.restore(state);
    }
  } catch (const std::exception& e) {
    positions.restore(state);
    return refuse(e.what());
  }
  return graph;
}

void DecodeGraph::record(nn::LanguageModel& model, int k) {
  const std::vector<Tensor*> slots = member_slots(state_);
  Replay& r = replays_[k];
  try {
    r.graph = cuda_runtime().capture(ids_[k].device().index, [&] {
      r.logits = model.step(ids_[k], state_);
      if (draw_) sample_tokens_(ids_[1 - k], r.logits, u_, *draw_);
      for (size_t i = 0; i < slots.size(); ++i) {
        // Undefined, or written in place by the step itself (softmax attention's KV cache).
        if (!inputs_[i].defined() || slots[i]->raw_data() == inputs_[i].raw_data()) continue;
        copy_(inputs_[i], *slots[i]);  // the new state over the old, in the graph
        *slots[i] = inputs_[i];
      }
    });
  } catch (...) {
    for (size_t i = 0; i < slots.size(); ++i) *slots[i] = inputs_[i];
    throw;
  }
}

void DecodeGraph::check_room() const {
  for (size_t i = 0; i < state_.layers.size(); ++i) {
    const int64_t limit = state_.layers[i]->token_limit();
    LINEA_CHECK(limit == 0 || state_.layers[i]->position < limit, "DecodeGraph", "layer ", i,
                "'s state was reserved for ", limit,
                " tokens and has seen them all; reserve more before capturing (generate: raise the maximum length)");
  }
}

void DecodeGraph::replay(int k) {
  replays_[k].graph->replay();
  last_ = k;
  ++state_.position;
  for (auto& layer : state_.layers) ++layer->position;
}

namespace {

// An Error unless `t` is what `like` holds: same dtype, shape and device.
void check_like(const Tensor& t, const Tensor& like, const char* what) {
  LINEA_CHECK(t.defined() && t.dtype() == like.dtype() && t.shape() == like.shape() && t.device() == like.device(),
              "DecodeGraph", "step takes the ", what, " its graph was captured for, ", like.describe(), ", got ",
              t.defined() ? t.describe() : std::string("nothing"));
}

}  // namespace

const Tensor& DecodeGraph::step(const Tensor& ids) {
  LINEA_CHECK(!draw_, "DecodeGraph", "this graph draws the next ids itself: step it with step_and_draw");
  check_like(ids, ids_[0], "ids");
  check_room();
  {
    NoGradGuard no_grad;
    copy_(ids_[0], ids);
  }
  replay(0);
  return replays_[0].logits;
}

const Tensor& DecodeGraph::step_and_draw(const Tensor& ids, const Tensor& u) {
  LINEA_CHECK(draw_, "DecodeGraph", "this graph was captured without a draw: step it with step");
  check_like(ids, ids_[0], "ids");
  check_like(u, u_, "uniforms");
  check_room();
  const int k = next_;
  {
    NoGradGuard no_grad;
    // The ids the last step drew are where this one reads them; others are copied there.
    if (ids.raw_data() != ids_[k].raw_data() || !ids.is_contiguous()) copy_(ids_[k], ids);
    if (draw_->temperature > 0) copy_(u_, u);
  }
  replay(k);
  next_ = 1 - k;
  return ids_[1 - k];
}

DecodeGraph::~DecodeGraph() = default;

}  // namespace linea::train
