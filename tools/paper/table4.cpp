// `linea paper table4`: Table 4 of the paper. Seven models trained from scratch on the same budget
// (Transformer, four linear attentions, ReGLA, the half-softmax hybrid), and the "w/ Pretrain"
// half: the Transformer row's trained model linearized into each of the other six, then trained
// on the same budget again. The rows' patterns are docs/math.md#regla-paper-tables'.
#include <string>
#include <vector>

#include "tools/paper/comparison.h"
#include "tools/paper/experiment.h"

namespace linea::cli::paper {

namespace {

struct Table4Row {
  std::string id, label;
  RowModel model;
  double scratch_ppl;   // the paper's, WikiText-103
  double pretrain_ppl;  // 0: no w/ Pretrain row (the Transformer)
};

const std::vector<Table4Row>& table4_rows() {
  static const std::vector<Table4Row> rows = {
      {"transformer", "Transformer", {"S"}, 18.5, 0},
      {"la-relu", "LA w/ ReLU", {"L", {{"L", {{"feature_map", "relu"}}}}}, 28.5, 22.3},
      {"la-elu", "LA w/ ELU", {"L"}, 31.3, 23.5},
      {"hedgehog", "HedgeHog", {"H"}, 22.4, 18.4},
      {"fast-decay", "LA w/ Fast Decay", {"F"}, 20.8, 18.2},
      {"regla", "ReGLA", {"R", {{"R", regla_options()}}}, 19.0, 16.4},
      {"hybrid-regla", "Hybrid ReGLA", {"SR", {{"R", regla_options()}}}, 17.8, 14.8},
  };
  return rows;
}

std::vector<std::string> row_ids() {
  std::vector<std::string> ids;
  for (const Table4Row& r : table4_rows()) {
    ids.push_back(r.id);
    if (r.pretrain_ppl > 0) ids.push_back("pretrain-" + r.id);
  }
  return ids;
}

void run_table4(const PaperRun& run, Report& report) {
  const LmBudget budget = lm_budget(run);
  report.heading("Table 4: perplexity of linear attention variants, from scratch and w/ Pretrain");
  report.paragraph(
      "Every row: " + runs_description(run) + ". ReGLA's gate decays the key dim (`gate_dim: key`, as the paper's GLA kernels do). The paper: Pythia-160M's "
      "shape (12 layers, d 768), 50k steps on WikiText-103.");

  // The softmax model trained from scratch is also what every w/ Pretrain row starts from, so it
  // is trained whenever any row of either half runs.
  bool any_pretrain = false;
  for (const Table4Row& r : table4_rows())
    any_pretrain = any_pretrain || (r.pretrain_ppl > 0 && row_selected(run, "pretrain-" + r.id));

  std::vector<ComparedRow> scratch, pretrained;
  RowResult transformer;
  for (const Table4Row& r : table4_rows()) {
    const bool is_source = r.id == "transformer";
    if (!row_selected(run, r.id) && !(is_source && any_pretrain)) continue;
    RowResult result = train_from_scratch(run, r.id, r.model);
    if (is_source) transformer = result;
    if (row_selected(run, r.id))
      scratch.push_back({r.id, r.label, r.model.describe(budget.layers), r.scratch_ppl, result});
  }
  for (const Table4Row& r : table4_rows()) {
    const std::string id = "pretrain-" + r.id;
    if (r.pretrain_ppl <= 0 || !row_selected(run, id)) continue;
    // The paper continues training the whole linearized model (Kasai et al.'s and Mao's recipe);
    // it has no attention-transfer stage, so neither does this row.
    RowResult result = linearize_from(run, id, transformer, r.model);
    pretrained.push_back({id, r.label + " w/ Pretrain", r.model.describe_linearized(budget.layers), r.pretrain_ppl, result});
  }

  json::Value out = json::Value::object();
  const char* pretrain_intro =
      "Each row starts from the Transformer row's trained model (its checkpoint), copies every weight that carries "
      "over (`linea linearize`, train/linearize.h), the new layers' own parameters (gates, maps, norms) from "
      "their initialisation, and trains the whole model for the budget above again: the paper's continual "
      "training. No attention transfer (stage 1): the paper's rows do not use it. So a w/ Pretrain row has seen "
      "twice the tokens of a from-scratch row, the first half as softmax attention on the same corpus (the "
      "paper's pretraining is Pythia's, on the Pile).";
  report_half(report, out, "scratch", "From scratch", scratch);
  report_half(report, out, "pretrain", "w/ Pretrain", pretrained, pretrain_intro);
  if (!scratch.empty() && !pretrained.empty()) {
    // Both halves as one ordering of 13 rows, as the paper's table reads top to bottom.
    std::vector<ComparedRow> all = scratch;
    all.insert(all.end(), pretrained.begin(), pretrained.end());
    const json::Value both = compare_rows(all);
    out["spearman_all_rows"] = both["spearman"];
    report.paragraph("Spearman over both halves together (" + std::to_string(all.size()) + " rows): " +
                     spearman_text(both) + ".");
  }
  out["budget"] = budget.to_json();
  report.json()["table4"] = out;
}

}  // namespace

Experiment table4_experiment() {
  return {"table4", "Table 4: perplexity of LA variants, ReGLA and the hybrid, from scratch and linearized", run_table4,
          row_ids()};
}

}  // namespace linea::cli::paper
