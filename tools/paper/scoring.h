#pragma once
// Scoring a trained table row beyond what the trainer reports: the test split re-read with the
// model's own tokenizer, the same model under a changed layer option (table6's eps check), and
// the two ways of scoring a sequence (causality: the parallel form, and decoding token by token).
#include <cstdint>
#include <string>
#include <vector>

#include "tools/paper/experiment.h"
#include "train/saved_model.h"

namespace linea::cli::paper {

// The test split of the run's corpus, encoded with the model's tokenizer.
std::vector<int64_t> test_tokens(const PaperRun& run, const train::SavedModel& model);

// A model whose config is `saved`'s with layers[letter][key] = value and whose weights are
// saved's: only for options that add or remove no parameter (a scale, a key max mode).
std::shared_ptr<nn::LanguageModel> with_layer_option(const train::SavedModel& saved, const std::string& letter,
                                                     const std::string& key, const json::Value& value, Device device);

// Mean next-token cross-entropy over the first `windows` (0: all) windows of seq + 1 tokens
// (stride seq), batch at a time: by the parallel form (forward over each window), and by
// decoding it one token at a time (step(), the recurrent form, which sees no future token).
struct WindowScores {
  double parallel_loss = 0, decode_loss = 0;
  int64_t tokens = 0;  // targets scored, the same for both
};
WindowScores score_parallel_and_decoding(nn::LanguageModel& model, const std::vector<int64_t>& tokens, int64_t batch,
                                         int64_t seq, int64_t windows, Device device);

}  // namespace linea::cli::paper
