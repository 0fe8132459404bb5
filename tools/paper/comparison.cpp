#include "tools/paper/comparison.h"

#include <cmath>

#include "tools/paper/spearman.h"

namespace linea::cli::paper {

json::Value compare_rows(const std::vector<ComparedRow>& rows) {
  std::vector<double> paper, linea;
  for (const ComparedRow& r : rows) {
    paper.push_back(r.paper_ppl);
    linea.push_back(r.linea.ppl());  // +inf for a diverged row: ranked last
  }
  const std::vector<double> paper_rank = average_ranks(paper), linea_rank = average_ranks(linea);
  json::Value json_rows = json::Value::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    json::Value row = rows[i].linea.to_json();
    row["id"] = rows[i].id;
    row["label"] = rows[i].label;
    row["config"] = rows[i].config;
    row["paper_ppl"] = rows[i].paper_ppl;
    row["paper_rank"] = paper_rank[i];
    row["linea_rank"] = linea_rank[i];
    json_rows.push_back(row);
  }
  json::Value result = {{"rows", json_rows}, {"spearman", json::Value()}};
  if (rows.size() >= 2) {
    const double rho = spearman_correlation(paper, linea);
    if (std::isfinite(rho)) result["spearman"] = rho;
  }
  return result;
}

json::Value report_comparison(Report& report, const std::vector<ComparedRow>& rows) {
  const json::Value result = compare_rows(rows);
  MarkdownTable table({"row", "linea: pattern, options", "parameters", "paper PPL", "linea test PPL", "paper rank",
                       "linea rank"});
  for (size_t i = 0; i < rows.size(); ++i) {
    const ComparedRow& r = rows[i];
    const json::Value& ranked = result["rows"][i];
    table.add_row({r.label, r.config, std::to_string(r.linea.parameters()), format_number(r.paper_ppl, 3),
                   r.linea.ppl_text(), format_number(ranked["paper_rank"].get<double>(), 3),
                   format_number(ranked["linea_rank"].get<double>(), 3)});
  }
  report.table(table);
  report.paragraph("Spearman rank correlation of linea's ordering with the paper's (ties by average rank): " +
                   spearman_text(result) + ".");
  return result;
}

void report_half(Report& report, json::Value& out, const std::string& key, const std::string& heading,
                 const std::vector<ComparedRow>& rows, const std::string& intro) {
  if (rows.empty()) return;
  report.heading(heading);
  if (!intro.empty()) report.paragraph(intro);
  out[key] = report_comparison(report, rows);
}

std::string spearman_text(const json::Value& comparison) {
  if (!comparison["spearman"].is_null()) return format_number(comparison["spearman"].get<double>(), 3);
  return comparison["rows"].size() < 2 ? "n/a (fewer than 2 rows)" : "n/a (no ordering: all ties)";
}

}  // namespace linea::cli::paper
