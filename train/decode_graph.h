#pragma once
// A decoding step captured once in a CUDA graph and replayed for every token (cuda/graph.h).
//
// Batch-1 decoding of a small model is bound by the host: a step is a few hundred small kernels,
// and queuing each costs the host more than the GPU takes to run it. Replaying the captured step
// queues all of them with one launch.
//
// A graph replays fixed kernels on fixed memory, so the step may be captured only where it does
// the same work on the same buffers every token:
// - The state's tensors must keep their shapes. Recurrent layers (the linear and gated family,
//   Griffin, WQKV pooling) do; softmax attention's KV cache does once it is reserved
//   (LanguageModel::reserve: sized for the tokens to come, written in place by the step), and
//   not before, since it grows (capture() then says so). Replaying past the reserve is an error.
// - The step reads its inputs from buffers of its own: the ids (copied in by step()) and the
//   state's tensors as they were at the capture. The step computes each new state tensor into
//   the graph's memory and, as its last kernels, copies it back over the old one, so the
//   state object keeps pointing at the same buffers and the next replay reads the new values
//   (a tensor the step writes in place, like the KV cache, needs no copy).
// - The host-side counters (positions) are advanced by step(), as model.step() advances them.
// Replays run exactly the kernels an eager step runs, so a graphed step gives the same logits,
// bit for bit (tests/train/decode_graph_test.cpp).
#include <memory>
#include <string>

#include "nn/model.h"
#include "tensor/device_runtime.h"

namespace linea::train {

class DecodeGraph {
 public:
  // Captures model.step() on `state`, a state of `batch` sequences on the CUDA `device`; the
  // state is left as it was (the capture runs nothing). nullptr, with the reason in *why_not, where the step cannot be replayed: not a CUDA
  // device, a state that changes shape as it decodes, or work the capture refused.
  static std::unique_ptr<DecodeGraph> capture(nn::LanguageModel& model, nn::LanguageModel::State& state,
                                              int64_t batch, Device device, std::string* why_not);

  // One step for ids (B) Int64 on the device, as model.step(ids, state): the state advances, and
  // the logits (B, V) are returned in the graph's own buffer, overwritten by the next step.
  const Tensor& step(const Tensor& ids);

  // The kernels and copies one step replays (a measure of what a fused step kernel would save).
  size_t node_count() const { return graph_->node_count(); }

  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;
  ~DecodeGraph();

 private:
  explicit DecodeGraph(nn::LanguageModel::State& state) : state_(state) {}

  nn::LanguageModel::State& state_;
  Tensor ids_;                  // the step's input, (B) Int64
  Tensor logits_;               // its output, (B, V)
  std::vector<Tensor> inputs_;  // the state's tensors the graph reads and overwrites
  std::unique_ptr<DeviceGraph> graph_;
};

}  // namespace linea::train
