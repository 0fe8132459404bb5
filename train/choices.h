#pragma once
// Multiple-choice scoring, the way evaluation harnesses score BoolQ, PIQA or HellaSwag with a
// language model (`linea eval --choices FILE.jsonl`; the ReGLA paper's Table 5 reports such
// accuracies). Each item is a context and candidate endings, one of them right:
//
//   {"context": "The cat sat on the", "endings": [" mat.", " moon."], "label": 0}
//
// An ending's score is the log-likelihood the model gives its tokens after the context's,
// log p(ending | prompt) = sum over the ending's tokens of log softmax(logits)[token], the prompt
// and the ending encoded separately and joined (the harnesses' convention: the boundary stays
// where the text has it). The prediction is the ending with the largest score: `acc` by the sum,
// `acc_norm` by the sum divided by the ending's length in bytes (which stops long endings losing
// for having more tokens to pay for; the harnesses' acc_norm).
//
// k-shot prompts put k solved items in front of the context: other items of the same file
// (never the item itself), drawn per item from `seed`, each written as its context and right
// ending, separated by a blank line. k = 0 scores the context alone.
#include <cstdint>
#include <string>
#include <vector>

#include "nn/model.h"
#include "train/tokenizer.h"

namespace linea::train {

struct ChoiceItem {
  std::string context;
  std::vector<std::string> endings;
  int64_t label = 0;  // index into endings
};

// Reads a JSON-lines file of items (blank lines skipped). Errors name the file and line: a line
// that is not an object with a string "context", an array of at least two strings "endings" and
// an integer "label" within it; unknown keys; a file without items.
std::vector<ChoiceItem> read_choice_items(const std::string& path);

// The prompt item `index` is scored after: `shots` other items (context + right ending, each
// followed by a blank line), drawn without repetition from the others with `seed`, then its
// context. shots must be < items.size().
std::string few_shot_prompt(const std::vector<ChoiceItem>& items, size_t index, int64_t shots, uint64_t seed);

struct ChoiceScore {
  std::vector<double> log_likelihoods;  // one per ending
  int64_t predicted = 0;                // argmax of the sums (the first on ties)
  int64_t predicted_norm = 0;           // argmax of the sums per byte of the ending
};

struct ChoiceResult {
  std::vector<ChoiceScore> items;
  double acc = 0, acc_norm = 0;  // shares of items predicted right
};

// Scores every item (no graph, eval mode, on `device`). The text of every prompt and ending must
// be encodable by the tokenizer (no <unk>) and every ending must encode to at least one token:
// Errors name the item's line otherwise. `items_origin` names the file in those errors.
ChoiceResult score_choices(nn::LanguageModel& model, const Tokenizer& tokenizer, const std::vector<ChoiceItem>& items,
                           int64_t shots, uint64_t seed, Device device, const std::string& items_origin);

}  // namespace linea::train
