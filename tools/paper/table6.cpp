// `linea paper table6`: Table 6 of the paper, ReGLA's ablations. The feature dim (the q/k width m
// of each head, 16 to 96, every other choice ReGLA's) and the feature map at m = 64 (ReLU and
// ELU + 1 without a scale, the normalized exp with 1/sqrt(m) and with the variance factor
// 1 / (e sqrt(m (e^2 - 1))), ReGLA's default: the same configuration as the m = 64 row, which is
// run once and reported in both places, as the paper's two 19.0s are one model).
//
// The last two rows differ only in a constant factor on phi(q), so on the attention output o_t;
// the per-head output RMSNorm divides it out except through its eps: o / sqrt(mean o^2 + eps). The
// experiment measures that twice: the two rows trained from the same seed, and the m = 64 model
// scored again with its scale swapped (same weights).
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "tools/paper/comparison.h"
#include "tools/paper/experiment.h"
#include "tools/paper/scoring.h"
#include "train/evaluate.h"

namespace linea::cli::paper {

namespace {

struct Table6Row {
  std::string id, label;
  json::Value options;  // ReGLA's options for the row, on top of regla_options()
  double paper_ppl;
  std::string same_as;  // a row of the same configuration, whose run this one reports
};

const std::vector<Table6Row>& feature_dim_rows() {
  static const std::vector<Table6Row> rows = {
      {"dim16", "m = 16", {{"feature_dim", 16}}, 36.5, ""},
      {"dim32", "m = 32", {{"feature_dim", 32}}, 24.7, ""},
      {"dim64", "m = 64", {{"feature_dim", 64}}, 19.0, ""},
      {"dim96", "m = 96", {{"feature_dim", 96}}, 18.8, ""},
  };
  return rows;
}

const std::vector<Table6Row>& feature_map_rows() {
  static const std::vector<Table6Row> rows = {
      {"relu", "ReLU", {{"feature_dim", 64}, {"feature_map", "relu"}, {"scale", "none"}}, 21.5, ""},
      {"elu", "ELU + 1", {{"feature_dim", 64}, {"feature_map", "elu+1"}, {"scale", "none"}}, 23.7, ""},
      {"exp-inv-sqrt", "exp w/ 1/sqrt(d)", {{"feature_dim", 64}, {"scale", "inv_sqrt_dim"}}, 20.7, ""},
      {"exp-variance", "exp w/ 1/(e sqrt(d (e^2 - 1)))", {{"feature_dim", 64}, {"scale", "variance"}}, 19.0, "dim64"},
  };
  return rows;
}

std::vector<std::string> row_ids() {
  std::vector<std::string> ids;
  for (const auto* rows : {&feature_dim_rows(), &feature_map_rows()})
    for (const Table6Row& r : *rows) ids.push_back(r.id);
  return ids;
}

RowModel regla(const Table6Row& r) { return {"R", {{"R", regla_options(r.options)}}}; }

// The eps check on the m = 64 (variance scale) model: its test perplexity, and the same weights
// scored with the 1/sqrt(m) scale.
json::Value swapped_scale_check(const PaperRun& run, const RowResult& variance_row, Report& report) {
  const LmBudget b = lm_budget(run);
  const LmRun& r = variance_row.runs.front();
  if (r.diverged) return json::Value();
  const Device device = Device::parse(run.device);
  train::SavedModel saved = train::load_saved_model(r.checkpoint, device);
  const std::vector<int64_t> tokens = test_tokens(run, saved);
  const std::shared_ptr<nn::LanguageModel> swapped = with_layer_option(saved, "R", "scale", "inv_sqrt_dim", device);
  const double as_trained = train::evaluate(*saved.model, tokens, b.batch, b.seq, device).loss;
  const double with_swapped = train::evaluate(*swapped, tokens, b.batch, b.seq, device).loss;
  report.paragraph("**The eps check, same weights.** The m = 64 model (seed " + std::to_string(r.seed) +
                   ") scored on the test split with the scale it was trained with (variance factor): loss " +
                   format_number(as_trained, 8) + "; the same weights with 1/sqrt(m) instead (a factor e sqrt(e^2 - 1) = " +
                   format_number(std::exp(1.0) * std::sqrt(std::exp(2.0) - 1), 4) + " larger on every o_t): loss " +
                   format_number(with_swapped, 8) + ", a difference of " +
                   format_number(with_swapped - as_trained, 3) +
                   " nats per token. That difference is all the scale does in this layer: the output RMSNorm "
                   "removes it except through eps = 1e-6.");
  return {{"loss_variance_scale", as_trained}, {"loss_inv_sqrt_scale_same_weights", with_swapped},
          {"difference", with_swapped - as_trained}};
}

void run_table6(const PaperRun& run, Report& report) {
  const LmBudget budget = lm_budget(run);
  report.heading("Table 6: ReGLA's feature dimension and feature map");
  report.paragraph("Every row: ReGLA (`R`, gate on the key dim), " + runs_description(run) +
                   ". m is the q/k width of each head (`feature_dim`); the head's value width stays d_model / heads = " +
                   std::to_string(budget.d_model / budget.heads) + ". The feature-map rows use m = 64.");

  std::map<std::string, RowResult> trained;  // by row id, for the rows reported twice
  auto run_rows = [&](const std::vector<Table6Row>& rows) {
    std::vector<ComparedRow> compared;
    for (const Table6Row& r : rows) {
      if (!row_selected(run, r.id)) continue;
      const std::string key = r.same_as.empty() ? r.id : r.same_as;
      if (!trained.count(key)) trained[key] = train_from_scratch(run, key, regla(r));
      compared.push_back({r.id, r.label, regla(r).describe(budget.layers) + (r.same_as.empty() ? "" : " (the " + r.same_as + " run)"),
                          r.paper_ppl, trained[key]});
    }
    return compared;
  };
  json::Value out = json::Value::object();
  const std::vector<ComparedRow> dims = run_rows(feature_dim_rows());
  if (!dims.empty()) {
    report.heading("Feature dimension");
    out["feature_dim"] = report_comparison(report, dims);
  }
  const std::vector<ComparedRow> maps = run_rows(feature_map_rows());
  if (!maps.empty()) {
    report.heading("Feature map");
    out["feature_map"] = report_comparison(report, maps);
  }
  if (trained.count("dim64") && trained.count("exp-inv-sqrt")) {
    const double a = trained["exp-inv-sqrt"].ppl(), b = trained["dim64"].ppl();
    report.paragraph("**The eps check, trained.** exp w/ 1/sqrt(d) against the variance factor, same seeds: test PPL " +
                     format_number(a, 6) + " against " + format_number(b, 6) + " (relative difference " +
                     format_number((a - b) / b, 3) +
                     "). The two layers compute o / sqrt(mean o^2 + eps) of outputs o that differ by a constant "
                     "factor, so the runs part only where mean o^2 is within reach of eps = 1e-6; the paper's gap "
                     "(20.7 against 19.0) cannot come from the scale in a layer with this norm.");
    out["eps_check_trained"] = {{"ppl_inv_sqrt", a}, {"ppl_variance", b}, {"relative_difference", (a - b) / b}};
    out["eps_check_same_weights"] = swapped_scale_check(run, trained["dim64"], report);
  }
  out["budget"] = budget.to_json();
  report.json()["table6"] = out;
}

}  // namespace

Experiment table6_experiment() {
  return {"table6", "Table 6: ReGLA with feature dims 16-96 and four feature maps (and the scale's eps check)",
          run_table6, row_ids()};
}

}  // namespace linea::cli::paper
