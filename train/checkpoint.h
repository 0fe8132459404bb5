#pragma once
// Checkpoints: everything a run needs to resume exactly where it stopped.
//
// Layout of a run's checkpoint root ROOT:
//
//   ROOT/LATEST                    the name of the current checkpoint ("step-00001000\n")
//   ROOT/step-00000500/            an older complete checkpoint (kept: keep_last)
//   ROOT/step-00001000/            the current one:
//       model.safetensors            the weights (state dict), __metadata__ {"format": "linea",
//                                    "format_version": "1"}; readable by any safetensors reader
//       config.json                  the model config, as the caller gave it
//       optimizer.safetensors        the optimizer's buffers; its type and scalars (lr, step
//                                    counts) in __metadata__ ("optimizer", "scalar.<name>")
//       trainer.json                 step, lr, RNG seed and offset (decimal strings: they are
//                                    uint64), the batcher's state, the tokenizer's description and
//                                    whatever else the caller keeps, each as the caller's JSON
//       manifest.json                format version, then the size and FNV-1a 64 of each file above
//   ROOT/step-00001500.tmp/        a save in progress, or one a crash interrupted
//
// Saving step N: (1) remove any *.tmp left by an interrupted save; (2) write the five files into
// ROOT/step-N.tmp/, manifest last, each fsynced, then fsync the directory; (3) rename it to
// ROOT/step-N (the first free name of step-N, step-N-1, step-N-2, ... so that re-saving a step
// never touches the checkpoint LATEST names) and fsync ROOT; (4) replace LATEST atomically (write
// LATEST.tmp<pid>, fsync, rename, fsync ROOT); (5) remove older checkpoints beyond keep_last.
//
// Why a crash anywhere leaves a usable checkpoint: LATEST changes only by an atomic rename in (4),
// and until then names the previous checkpoint, which nothing before (5) touches. Whatever LATEST
// names was fully written and fsynced before LATEST was changed to name it (steps 2-3 complete
// before 4), so it is complete on disk. A crash in (1)-(3) leaves a *.tmp or an uncommitted
// directory that LATEST does not name and the next save removes or skips; a crash in (5) leaves
// extra old checkpoints. Loading checks every file against the manifest, so damage done after
// the fact (a bad disk, a truncating copy) is refused with an error naming the file, never loaded.
#include <cstdint>
#include <optional>
#include <string>

#include "nn/json.h"
#include "nn/module.h"
#include "train/optimizer.h"

namespace linea::train {

struct TrainerState {
  int64_t step = 0;  // steps completed
  double lr = 0.0;
  uint64_t rng_seed = 0;    // the run's Generator: seed() and offset()
  uint64_t rng_offset = 0;
  json::Value data;       // the batcher's position, read back by the batcher
  json::Value tokenizer;  // the tokenizer's description
  json::Value extra;      // anything else the caller wants back (best loss, elapsed time, ...)
};

struct Checkpoint {
  nn::StateDict model;  // tensors on any device; loaded back on the CPU
  json::Value config;
  OptimizerState optimizer;
  TrainerState trainer;
};

struct CheckpointOptions {
  // How many checkpoints to keep, the new one included (0: keep all). Only checkpoints older than
  // the new one (lower step) are removed: after resuming from an earlier checkpoint, the later
  // ones of the abandoned run are left for the user to delete.
  int keep_last = 2;
};

// Writes a checkpoint for checkpoint.trainer.step under root (created if missing) and makes it
// the latest; returns its directory.
std::string save_checkpoint(const std::string& root, const Checkpoint& checkpoint,
                            const CheckpointOptions& options = {});

// The directory LATEST names, or nullopt when root holds no checkpoint yet (a fresh run).
std::optional<std::string> latest_checkpoint(const std::string& root);

// Checks every file of a checkpoint directory against its manifest (size and checksum); an Error
// names the first file that is missing, truncated or corrupt.
void verify_checkpoint(const std::string& dir);

// Verifies, then reads a checkpoint directory (one that latest_checkpoint returned, or an older
// one chosen by hand). Parameter names of older versions come back under today's names
// (nn::current_parameter_name: blocks.<i>.attn.* is now blocks.<i>.mixer.*), in the model and the
// optimizer state alike.
Checkpoint load_checkpoint(const std::string& dir);

}  // namespace linea::train
