#pragma once
// The flags of train::TrainOptions, in the groups `linea train` and `linea linearize` share
// (linearize takes its model and tokenizer from the trained run, so not those flags), and the
// helpers both use around them; `linea generate` shares the sampling flags, and `linea eval` and
// `linea generate` the device flags.
#include <string>

#include "tools/flags.h"
#include "train/train_options.h"

namespace linea::cli {

void add_data_flags(Flags& f, train::TrainOptions& o);  // data, cache-dir
// What follows the model's flags: optimization (steps, batch, seq, ... clip), LoRA (lora-rank,
// lora-alpha, lora-targets, merge-lora) and the run (seed, device, out, resume, evaluation, sample).
void add_training_flags(Flags& f, train::TrainOptions& o);

// --drop-unknown, --temperature, --top-k, --top-p: how a prompt is read and tokens are drawn, for
// train's sample (in add_training_flags) and `linea generate`.
void add_sampling_flags(Flags& f, bool& drop_unknown, double& temperature, int64_t& top_k, double& top_p);

// --device cpu|cuda|cuda:N and --precision: where a model computes and how, for train (in
// add_training_flags), linearize, eval and generate.
void add_device_flags(Flags& f, std::string& device, std::string& precision);
// --precision fp32|bf16 (nn/precision.h), for those and bench train.
void add_precision_flag(Flags& f, std::string& precision);

// "lora_rank" -> "lora-rank": an option's JSON key as its flag is spelled.
std::string to_flag_name(std::string key);

// Copies into `into` the options whose flags the user gave (their values in `given`); the others
// keep into's values.
void apply_given_flags(const Flags& flags, const train::TrainOptions& given, train::TrainOptions& into);

// A word as the shell reads it back: as it is when every character is safe, else single-quoted.
std::string shell_quote(const std::string& word);

}  // namespace linea::cli
