#pragma once
// The language-model runs behind the paper's perplexity tables (table4, table6, table2,
// causality): one budget per scale, shared by every row of a table so that rows differ only in
// their layers, and the two ways a row's model is made: trained from scratch, or linearized from
// a trained softmax model (train/linearize.h). Each run lives in OUT/runs/<row>-seed<k>,
// replaced by a rerun.
#include <cstdint>
#include <string>
#include <vector>

#include "nn/json.h"
#include "tools/paper/experiment.h"

namespace linea::cli::paper {

// What every row of a table gets: the model's size and the tokens it trains on.
struct LmBudget {
  std::string tokenizer;  // char on the default corpus (tiny), word on WikiText-2 (small)
  int64_t d_model = 0, layers = 0, heads = 0;
  int64_t steps = 0, batch = 0, seq = 0, warmup = 0;
  double lr = 0;
  int64_t tokens() const { return steps * batch * seq; }
  std::string describe() const;  // one line for the report
  json::Value to_json() const;
};
LmBudget lm_budget(const PaperRun& run);

// The corpus the table runs read: --data when given; at --scale tiny without it, the first
// 200 kB of the default corpus's training split and 8 kB of its validation and test splits,
// written once to OUT/runs/tiny-corpus (the trainer's final evaluation covers whole splits, and
// on the full default corpus that is a thousand batches per row, against a few dozen steps).
std::string table_data(const PaperRun& run);
std::string data_description(const PaperRun& run);  // for the report: which corpus, how much of it
// What every row of the run's tables gets, for the report: the budget, the seeds and the corpus.
std::string runs_description(const PaperRun& run);

// A row's layers: a pattern unit repeated to the budget's depth ("SR" -> "SRSRSR") and the
// per-letter options (nn/config.h "layers").
struct RowModel {
  std::string unit;
  json::Value layer_options = json::Value::object();
  std::string pattern(int64_t layers) const;
  std::string describe(int64_t layers) const;  // "RRRR {"R":{"gate_dim":"key"}}"
  std::string describe_linearized(int64_t layers) const;  // "SSSS -> RRRR {...}": from a softmax model
};

// ReGLA as the paper ran it: its kernels (flash-linear-attention's GLA) decay the KEY dim, where
// linea's default follows the paper's equations (the value dim). docs/math.md#regla-paper-tables.
json::Value regla_options(json::Value extra = json::Value::object());

// One trained model. A run whose loss or gradient became NaN or Inf is recorded as diverged
// (the trainer stops it with an Error): for a table that is a result, not a failure.
struct LmRun {
  uint64_t seed = 0;
  bool diverged = false;
  std::string error;  // why it diverged
  double test_loss = 0, test_ppl = 0, valid_ppl = 0;
  int64_t parameters = 0, steps = 0, tokens = 0;
  double seconds = 0;
  std::string checkpoint;  // the final checkpoint (empty when diverged)
  json::Value to_json() const;
};

// A row over the run's seeds.
struct RowResult {
  std::vector<LmRun> runs;
  // The mean test perplexity over the seeds; +inf when any run diverged (ranked last).
  double ppl() const;
  std::string ppl_text() const;  // "123.4", "123.4 (120.1-126.0)" over seeds, "diverged"
  int64_t parameters() const { return runs.empty() ? 0 : runs.front().parameters; }
  json::Value to_json() const;
};

// Trains `row` from scratch under the run's budget, once per seed (run.seed, run.seed + 1, ...).
RowResult train_from_scratch(const PaperRun& run, const std::string& id, const RowModel& row);

// Linearizes each seed's trained softmax model (sources, one per seed, as train_from_scratch
// returned them) into `row`: copy, then transfer_steps of attention transfer (0: none), then a
// full fine-tune of the budget's steps.
RowResult linearize_from(const PaperRun& run, const std::string& id, const RowResult& sources, const RowModel& row,
                         int64_t transfer_steps = 0);

// The run's --rows: true when the user did not restrict the rows or named this one.
bool row_selected(const PaperRun& run, const std::string& id);

}  // namespace linea::cli::paper
