#pragma once
// A trained model as `linea eval` and `linea generate` need it: the weights, the config and the
// tokenizer, read back from a checkpoint.
#include <memory>
#include <string>

#include "nn/model.h"
#include "train/checkpoint.h"
#include "train/tokenizer.h"

namespace linea::train {

struct SavedModel {
  std::shared_ptr<nn::LanguageModel> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  Checkpoint checkpoint;  // everything else it held (step, options, ...)
  std::string dir;        // the checkpoint directory that was read
};

// path is a run directory (its latest checkpoint is read) or one checkpoint directory. The model
// is built from the saved config and moved to device.
SavedModel load_saved_model(const std::string& path, Device device);

// The tokenizer a checkpoint records, as saved by the trainer.
json::Value tokenizer_record(const Tokenizer& tokenizer);
std::unique_ptr<Tokenizer> tokenizer_from_record(const json::Value& record, const std::string& origin);

}  // namespace linea::train
