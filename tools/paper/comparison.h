#pragma once
// A perplexity table with the paper's number beside linea's for each row, each side's rank, and
// the Spearman correlation of the two orderings (spearman.h): the tables' shared report.
#include <string>
#include <vector>

#include "tools/paper/lm_runs.h"
#include "tools/paper/report.h"

namespace linea::cli::paper {

struct ComparedRow {
  std::string id;      // --rows name and JSON key
  std::string label;   // the paper's row name
  std::string config;  // linea's pattern and options
  double paper_ppl = 0;
  RowResult linea;
};

// Both sides' ranks and the Spearman correlation, as JSON: {"rows": [...], "spearman": r or null}.
json::Value compare_rows(const std::vector<ComparedRow>& rows);

// Adds the table and a line with the Spearman correlation (when there are 2 or more rows) to the
// report, and returns the same as JSON: {"rows": [...], "spearman": r or null}.
json::Value report_comparison(Report& report, const std::vector<ComparedRow>& rows);

// One half of a table ("From scratch", "w/ Pretrain"): the heading, `intro` when not empty, and
// the comparison, which also goes to out[key]. Nothing when there are no rows.
void report_half(Report& report, json::Value& out, const std::string& key, const std::string& heading,
                 const std::vector<ComparedRow>& rows, const std::string& intro = "");

// "0.857" or "n/a (fewer than 2 rows)" / "n/a (no ordering: all ties)".
std::string spearman_text(const json::Value& comparison);

}  // namespace linea::cli::paper
