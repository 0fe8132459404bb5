#pragma once
// `linea linearize`: a trained softmax model turned into a linear or gated one, in two stages
// (LoLCATs' recipe; the math: ../docs/linearize.md):
//
//   copy    the new model (the new pattern, every other choice the trained run's) takes every
//           weight that carries over (nn/linearize.h); the new layers' own parameters start from
//           their letter's initialisation.
//   stage 1 attention transfer (transfer_steps > 0). The trained model is a frozen teacher. On
//           each batch it runs up to its last replaced layer; each new mixer runs on the teacher's
//           hidden state there (the normed input of the teacher's mixer) and is trained to give
//           the teacher's mixer output:
//               loss = sum over replaced layers l of mean (mixer_l^new(h_l) - mixer_l^softmax(h_l))^2
//           Only the new layers' own parameters train (feature maps, gates, output norms; with
//           transfer_qkvo also their q/k/v/o projections). The validation MSE per layer before
//           and after is printed and logged. Its checkpoints and log live in OUT/transfer/.
//   stage 2 fine-tuning (train.steps): an ordinary `linea train` run in OUT, starting from the
//           stage-1 weights (or the copy), training every parameter, or only LoRA adapters
//           (train.lora_rank > 0), merged into the weights at the end.
//
// OUT is then an ordinary run: `linea eval`, `linea generate` and `linea train --resume` work on
// it, and its log's "linearize" record says where each weight came from. The options are kept in
// OUT/linearize.json, so --resume continues whichever stage was interrupted, bitwise.
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "nn/linearize.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace linea::train {

struct LinearizeOptions {
  std::string checkpoint;      // the trained run (its latest checkpoint) or one checkpoint directory
  int64_t transfer_steps = 0;  // stage 1; 0: none
  double transfer_lr = 1e-3;   // stage 1's peak learning rate (cosine to a tenth of it, no warmup)
  bool transfer_qkvo = false;  // stage 1 also trains the replaced layers' copied q/k/v/o
  TrainOptions train;          // stage 2, and what both stages share: data, batch, seq, seed, device,
                               // out (the run directory), model (the new pattern)

  void validate() const;
  json::Value to_json() const;
  static LinearizeOptions from_json(const json::Value& value);  // unknown keys are errors
};

// The trained run: its checkpoint, config and training options.
struct SourceRun {
  Checkpoint checkpoint;
  std::string dir;  // the checkpoint directory read
  nn::ModelConfig config;
  TrainOptions options;
};
SourceRun load_source_run(const std::string& path);

// Where a fresh linearization starts: the trained run's options with the new pattern, the run
// directory, and what linearizing never inherits (resume, no LoRA unless asked).
TrainOptions linearized_train_options(const SourceRun& source, const std::string& pattern, const std::string& out);

// The options file of a linearization's run directory.
std::string linearize_options_path(const std::string& out);

struct TransferReport {
  std::vector<int64_t> layers;                // the replaced layers
  std::vector<double> mse_before, mse_after;  // validation MSE per replaced layer
  int64_t steps = 0;                          // stage-1 steps completed
};

struct LinearizeResult {
  TransferReport transfer;
  TrainResult train;     // stage 2 (empty when stage 1 was stopped)
  bool stopped = false;  // asked to stop: the latest checkpoint of the stage in progress holds it
  std::string stage;     // "transfer" or "finetune": where it stopped or ended
};

// Runs (resume: continues) the linearization into options.train.out. Messages go to `out`.
LinearizeResult linearize(const LinearizeOptions& options, bool resume, std::FILE* out = stderr,
                          const StopRequested& stop_requested = {});

// ---- the pieces of stage 1 (exposed for tests) ----

// Per replaced layer, mean((student mixer(h) - teacher mixer(h))^2) with h the teacher's hidden
// state at that layer on ids; differentiable w.r.t. the student (the teacher runs without a graph).
std::vector<Tensor> transfer_losses(nn::LanguageModel& teacher, nn::LanguageModel& student,
                                    const std::vector<int64_t>& layers, const Tensor& ids);

// transfer_losses averaged over the evaluation windows of tokens (the first max_batches batches;
// 0: all), weighted by their size, without a graph.
std::vector<double> transfer_mse(nn::LanguageModel& teacher, nn::LanguageModel& student,
                                 const std::vector<int64_t>& layers, std::span<const int64_t> tokens, int64_t batch,
                                 int64_t seq, Device device, int64_t max_batches);

// Whether attention transfer trains the new model's parameter `name`: a replaced layer's
// parameter that was not copied, or with qkvo any parameter of a replaced layer's mixer.
bool transfer_trains(const nn::Linearization& linearization, const std::string& name, bool qkvo);

}  // namespace linea::train
