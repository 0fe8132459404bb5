#pragma once
// The checkpoint of a training run at a step: the model's weights and config, the optimizer's
// state, and what the trainer needs to continue exactly (the learning rate, the dropout stream's
// position, the batcher's position, the tokenizer). `linea train` (trainer.cpp) and both stages
// of `linea linearize` (linearize.cpp) save these; `extra` carries what each adds of its own.
#include <utility>

#include "nn/model.h"
#include "train/batcher.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "train/saved_model.h"

namespace linea::train {

// `config` is the one the checkpoint records (the trainer's, without the dropout seed it derived).
inline Checkpoint run_checkpoint(const nn::LanguageModel& model, const nn::ModelConfig& config,
                                 const Optimizer& optimizer, int64_t step, const RandomBatcher& batcher,
                                 const Tokenizer& tokenizer, json::Value extra) {
  Checkpoint ck;
  ck.model = model.state_dict();
  ck.config = config.to_json();
  ck.optimizer = optimizer.state();
  ck.trainer.step = step;
  ck.trainer.lr = optimizer.lr();
  ck.trainer.rng_seed = model.dropout_generator().seed();
  ck.trainer.rng_offset = model.dropout_generator().offset();
  ck.trainer.data = to_json(batcher.state());
  ck.trainer.tokenizer = tokenizer_record(tokenizer);
  ck.trainer.extra = std::move(extra);
  return ck;
}

}  // namespace linea::train
