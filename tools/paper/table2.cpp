// `linea paper table2`: Table 2 of the paper, GLA with and without the stable (output)
// normalization, trained from scratch and linearized from a trained softmax model.
//
// The paper ablates the norm "after applying our feature mapping function": its GLA here has
// ReGLA's normalized exp map (bounded inner products), and the question is whether the norm is
// still needed. So the rows are linea's G (GLA's key gate) with `feature_map: normalized_exp` and
// the variance scale, with `output_norm` rms or none. (docs/math.md's mapping names plain `G`,
// whose identity map is unbounded: without the norm that row would test boundedness as well.)
#include <string>
#include <vector>

#include "tools/paper/comparison.h"
#include "tools/paper/experiment.h"

namespace linea::cli::paper {

namespace {

RowModel gla(const std::string& output_norm) {
  return {"G", {{"G", {{"feature_map", "normalized_exp"}, {"scale", "variance"}, {"output_norm", output_norm}}}}};
}

struct Table2Row {
  std::string id, label, norm;
  bool pretrained;
  double paper_ppl;
};

const std::vector<Table2Row>& table2_rows() {
  static const std::vector<Table2Row> rows = {
      {"norm", "GLA w/ norm, from scratch (WT)", "rms", false, 33.9},
      {"no-norm", "GLA w/o norm, from scratch (WT)", "none", false, 40.6},
      {"pretrain-norm", "GLA w/ norm, w/ Pretrain (SP)", "rms", true, 36.9},
      {"pretrain-no-norm", "GLA w/o norm, w/ Pretrain (SP)", "none", true, 73.0},
  };
  return rows;
}

void run_table2(const PaperRun& run, Report& report) {
  const LmBudget budget = lm_budget(run);
  report.heading("Table 2: GLA with and without the stable normalization");
  report.paragraph("Every row: GLA (`G`: GLA's key gate, low rank 16, tau 16) with ReGLA's normalized exp map and "
                   "variance scale, the output RMSNorm on or off; " +
                   runs_description(run) + ". w/ Pretrain: a softmax model (" + RowModel{"S"}.describe(budget.layers) +
                   ") trained on the same budget first, linearized (copy, no attention transfer: the paper "
                   "continues training the whole model) and trained on the budget again. The paper's rows: 8M tokens; "
                   "from scratch on WikiText-103, w/ Pretrain from Pythia-160M on SlimPajama.");
  bool any_pretrain = false;
  for (const Table2Row& r : table2_rows()) any_pretrain = any_pretrain || (r.pretrained && row_selected(run, r.id));
  RowResult source;
  if (any_pretrain) source = train_from_scratch(run, "softmax-source", {"S"});

  std::vector<ComparedRow> scratch, pretrained;
  for (const Table2Row& r : table2_rows()) {
    if (!row_selected(run, r.id)) continue;
    const RowModel model = gla(r.norm);
    const RowResult result = r.pretrained ? linearize_from(run, r.id, source, model) : train_from_scratch(run, r.id, model);
    (r.pretrained ? pretrained : scratch)
        .push_back({r.id, r.label, r.pretrained ? model.describe_linearized(budget.layers) : model.describe(budget.layers),
                    r.paper_ppl, result});
  }
  json::Value out = json::Value::object();
  report_half(report, out, "scratch", "From scratch", scratch);
  report_half(report, out, "pretrain", "w/ Pretrain", pretrained);
  if (!pretrained.empty()) out["softmax_source"] = source.to_json();
  out["budget"] = budget.to_json();
  report.json()["table2"] = out;
}

}  // namespace

Experiment table2_experiment() {
  return {"table2", "Table 2: GLA with and without the stable (output) normalization, from scratch and linearized",
          run_table2, ids_of(table2_rows())};
}

}  // namespace linea::cli::paper
