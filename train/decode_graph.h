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
// - The step reads its inputs from buffers of its own: the ids (copied in by step(); in a graph
//   captured with a draw, the ids the previous replay drew, see capture()) and the state's tensors
//   as they were at the capture. The step computes each new state tensor into
//   the graph's memory and, as its last kernels, copies it back over the old one, so the
//   state object keeps pointing at the same buffers and the next replay reads the new values
//   (a tensor the step writes in place, like the KV cache, needs no copy).
// - The host-side counters (positions) are advanced by step(), as model.step() advances them.
// Replays run exactly the kernels an eager step runs, so a graphed step gives the same logits,
// bit for bit (tests/train/decode_graph_test.cpp).
#include <memory>
#include <optional>
#include <string>

#include "nn/model.h"
#include "tensor/backend.h"  // SamplingParams
#include "tensor/device_runtime.h"

namespace linea::train {

class DecodeGraph {
 public:
  // Captures model.step() on `state`, a state of `batch` sequences on the CUDA `device`; the
  // state is left as it was (the capture runs nothing). nullptr, with the reason in *why_not,
  // where the step cannot be replayed: not a CUDA device, a state that changes shape as it
  // decodes, or work the capture refused.
  //
  // With `draw`, each replay also draws the next ids from its logits (sample_tokens with those
  // parameters) into a buffer of the graph's own, where the next replay reads them: a decoding
  // loop then runs nothing outside the graph but the replay (step_and_draw). The step is
  // captured twice, the two graphs taking turns, each reading the ids the other drew: a step's
  // ids stay untouched through the next step, so a copy of them to the host can run beside it.
  static std::unique_ptr<DecodeGraph> capture(nn::LanguageModel& model, nn::LanguageModel::State& state,
                                              int64_t batch, Device device, std::string* why_not,
                                              std::optional<SamplingParams> draw = {});

  // One step for ids (B) Int64 on the device, as model.step(ids, state): the state advances, and
  // the logits (B, V) are returned in the graph's own buffer, overwritten by the next step.
  // Graphs captured without a draw.
  const Tensor& step(const Tensor& ids);

  // Graphs captured with a draw: one step for ids (B) Int64 on the device, then the draw from its
  // logits with the uniforms u (B) Float64 (read only when the draw samples: temperature > 0).
  // Returns the ids drawn, (B) Int64 in the graph's own memory, where they stay until the step
  // after next; given back as the next step's ids, they are read where they are, without a copy.
  const Tensor& step_and_draw(const Tensor& ids, const Tensor& u);

  // The logits (B, V) of the last step, in the graph's own buffer.
  const Tensor& logits() const { return replays_[last_].logits; }

  // The kernels and copies one step replays (a measure of what a fused step kernel would save).
  size_t node_count() const { return replays_[0].graph->node_count(); }

  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;
  ~DecodeGraph();

 private:
  // One captured step: it reads ids_[k] and, with a draw, draws into ids_[1 - k].
  struct Replay {
    std::unique_ptr<DeviceGraph> graph;
    Tensor logits;  // (B, V), its output
  };

  explicit DecodeGraph(nn::LanguageModel::State& state) : state_(state) {}
  // Records replays_[k]; the state's members point at inputs_ again afterwards.
  void record(nn::LanguageModel& model, int k);
  // An Error when a layer has seen every token its state was reserved for.
  void check_room() const;
  // Replays replays_[k] and advances the host-side counters, as model.step() does.
  void replay(int k);

  nn::LanguageModel::State& state_;
  std::optional<SamplingParams> draw_;
  Tensor ids_[2];               // the steps' inputs, (B) Int64 (without a draw, ids_[0] alone)
  Tensor u_;                    // the draw's uniforms, (B) Float64 (with a draw only)
  std::vector<Tensor> inputs_;  // the state's tensors the graph reads and overwrites
  Replay replays_[2];           // without a draw, replays_[0] alone
  int next_ = 0;                // the replay the next step runs
  int last_ = 0;                // the replay the last step ran
};

}  // namespace linea::train
