#pragma once
// The training loop of `linea train`, end to end:
//
//   corpus + tokenizer -> model (from the layer pattern) -> AdamW or SGD with warmup + cosine /
//   linear / constant learning rate, gradient accumulation and clipping by global norm -> periodic
//   validation -> checkpoints (atomic, checksummed) -> final validation and test perplexity and a
//   generated sample.
//
// Runs are deterministic: one seed fixes the initial weights, the batches, the dropout masks and
// the sample, and --resume continues from the latest checkpoint so that the losses that follow are
// bitwise those of an uninterrupted run. A NaN or Inf loss or gradient stops training with an
// Error; the last checkpoint, written before, stays as it was.
//
// A run can also be asked to stop (`linea train` asks on Ctrl-C or SIGTERM): the step in progress
// finishes, a periodic evaluation in progress is abandoned at its next batch, a checkpoint of the
// last completed step is written, and train_model returns with `stopped` set. `--resume` then
// continues exactly as if nothing had happened.
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "dist/communicator.h"
#include "nn/model.h"
#include "train/optimizer.h"
#include "train/tokenizer.h"
#include "train/train_options.h"

namespace linea::train {

struct TrainResult {
  int64_t steps = 0;          // steps completed, counting those before a resume
  double valid_loss = 0, valid_ppl = 0;
  double test_loss = 0, test_ppl = 0;
  double seconds = 0;         // wall-clock time of this invocation
  double tokens_per_s = 0;    // training throughput of this invocation
  int64_t parameters = 0;
  std::string sample;
  std::string checkpoint;     // the final checkpoint's directory
  // stop_requested ended the run early: `checkpoint` holds step `steps` (possibly fewer than
  // --steps), and the losses, perplexities and sample were not computed.
  bool stopped = false;
};

// Asked between training steps and between evaluation batches; true stops the run (above). It
// is called often, so it must be cheap: `linea train` reads an atomic flag set by its signal
// handler (tools/stop_signals.h). The first call comes once the corpus is read and the model
// built, right before the first step: nothing is worth saving before it.
using StopRequested = std::function<bool()>;

// How a run that does not start from a random model begins (`linea linearize`'s fine-tuning
// stage, train/linearize.h). Used by a fresh run only: --resume reads everything from the
// checkpoint, and keeps the checkpoint's trainer.extra entries other than "options".
struct RunStart {
  // Called on the new model (on the CPU, before the optimizer is made) to put its first weights
  // in; what it returns, unless null, is written to the log after the config record.
  std::function<json::Value(nn::LanguageModel& model)> initialize;
  std::shared_ptr<const Tokenizer> tokenizer;  // encode with this vocabulary instead of building one
  json::Value extra = json::Value::object();   // kept in every checkpoint's trainer.extra
};

// Messages (progress, evaluations, the sample) go to `out`; the JSONL log to options.out/log.jsonl.
//
// With options.lora_rank > 0 only the adapters train (train/trainable.h); at the end of the run
// (not when stopped early) the checkpoint holds them merged into the weights when
// options.merge_lora: a plain model, whose options say lora_rank 0 and whose optimizer state is
// fresh, so that `linea train --resume` continues it as an ordinary run.
//
// With comm, this process is one rank of a data-parallel run (dist/communicator.h; `linea train
// --gpus N` starts the ranks): options.batch sequences per rank, each drawn from the same global
// batch (train/data_parallel.h), gradients averaged across ranks in buckets that overlap the
// backward pass (train/gradient_sync.h). The model lives on comm->device(). Rank 0 alone prints,
// logs, writes checkpoints and draws the sample; evaluation is shared. A stop request on any rank
// stops every rank after the same step. A resumed run keeps the checkpoint's global batch, so it
// may run on another number of ranks.
TrainResult train_model(const TrainOptions& options, std::FILE* out = stderr, const StopRequested& stop_requested = {},
                        const RunStart& start = {}, dist::Communicator* comm = nullptr);

// The optimizer options name (AdamW or SGD with their hyperparameters) over params.
std::unique_ptr<Optimizer> make_optimizer(const TrainOptions& options, std::vector<nn::NamedParameter> params);

// Independent seeds for a run's random streams, all derived from --seed (splitmix64).
enum SeedStream : uint64_t { kInitStream, kBatchStream, kDropoutStream, kSampleStream, kTransferBatchStream };
uint64_t derive_seed(uint64_t seed, uint64_t stream);

}  // namespace linea::train
