// `linea paper`'s tables end to end at --scale tiny (table4, table6, table2, causality): each
// trains its rows, writes its Markdown and JSON with the paper's numbers beside linea's and the
// Spearman correlation; --rows picks rows, and a row or --seeds that does not exist is a usage
// error (exit 2) before anything trains.
#include <cmath>
#include <filesystem>
#include <string>

#include "nn/json.h"
#include "tests/test_util.h"
#include "tests/tools/paper_corpus.h"
#include "tests/tools/run_linea.h"
#include "tests/train/temp_dir.h"
#include "train/file_io.h"

namespace linea::cli {
namespace {

using linea::testing::TempDir;

json::Value run_table(const std::string& experiment, const std::string& flags, const TempDir& dir) {
  const Outcome o = run_linea("paper " + experiment + " --scale tiny --data " + testing::write_paper_corpus(dir) + " " +
                              flags + " --out " + dir.path());
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_GT(std::filesystem::file_size(dir / (experiment + ".md")), 200u);
  return json::parse(train::read_file(dir / (experiment + ".json"), "test"));
}

// Every row trained to a finite perplexity, with the paper's beside it.
void expect_rows(const json::Value& comparison, size_t count) {
  ASSERT_EQ(comparison["rows"].size(), count) << json::dump(comparison, 2);
  for (const json::Value& row : comparison["rows"]) {
    EXPECT_GT(row["paper_ppl"].get<double>(), 1) << json::dump(row);
    ASSERT_FALSE(row["test_ppl"].is_null()) << json::dump(row);
    EXPECT_TRUE(std::isfinite(row["test_ppl"].get<double>()));
    EXPECT_GT(row["test_ppl"].get<double>(), 1);
  }
  const double rho = comparison["spearman"].get<double>();
  EXPECT_GE(rho, -1);
  EXPECT_LE(rho, 1);
}

TEST(PaperTables, Table4RunsBothHalvesAtTinyScale) {
  const TempDir dir;
  const json::Value report = run_table("table4", "", dir);
  expect_rows(report["table4"]["scratch"], 7);
  expect_rows(report["table4"]["pretrain"], 6);
  EXPECT_FALSE(report["table4"]["spearman_all_rows"].is_null());
  const std::string md = train::read_file(dir / "table4.md", "test");
  EXPECT_NE(md.find("| Hybrid ReGLA w/ Pretrain | `SS` -> `SR`"), std::string::npos) << md;
  EXPECT_NE(md.find("Spearman rank correlation"), std::string::npos);
}

TEST(PaperTables, Table4RowsPicksRowsAndStillTrainsTheSoftmaxSource) {
  const TempDir dir;
  const json::Value report = run_table("table4", "--rows regla,pretrain-regla", dir);
  ASSERT_EQ(report["table4"]["scratch"]["rows"].size(), 1u);
  EXPECT_EQ(report["table4"]["scratch"]["rows"][0]["id"], "regla");
  EXPECT_TRUE(report["table4"]["scratch"]["spearman"].is_null());  // one row: no ordering
  EXPECT_EQ(report["table4"]["pretrain"]["rows"][0]["id"], "pretrain-regla");
  EXPECT_TRUE(std::filesystem::exists(dir / "runs/transformer-seed0"));
}

TEST(PaperTables, Table6RunsAndMeasuresTheScaleThroughEps) {
  const TempDir dir;
  const json::Value report = run_table("table6", "", dir);
  expect_rows(report["table6"]["feature_dim"], 4);
  expect_rows(report["table6"]["feature_map"], 4);
  // The variance row is the m = 64 run, reported twice.
  EXPECT_EQ(report["table6"]["feature_map"]["rows"][3]["test_ppl"], report["table6"]["feature_dim"]["rows"][2]["test_ppl"]);
  // Same weights, the scale swapped: the output norm leaves only eps's share of a difference.
  EXPECT_LT(std::abs(report["table6"]["eps_check_same_weights"]["difference"].get<double>()), 1e-3);
}

TEST(PaperTables, Table2RunsFromScratchAndLinearized) {
  const TempDir dir;
  const json::Value report = run_table("table2", "", dir);
  expect_rows(report["table2"]["scratch"], 2);
  expect_rows(report["table2"]["pretrain"], 2);
}

TEST(PaperTables, SeedsAverageARowOverItsRuns) {
  const TempDir dir;
  const json::Value report = run_table("table2", "--rows norm,no-norm --seeds 2 --seed 5", dir);
  const json::Value& rows = report["table2"]["scratch"]["rows"];
  ASSERT_EQ(rows.size(), 2u);
  for (const json::Value& row : rows) {
    ASSERT_EQ(row["seeds"].size(), 2u);
    EXPECT_EQ(row["seeds"][0]["seed"], 5);
    EXPECT_EQ(row["seeds"][1]["seed"], 6);
    const double mean = (row["seeds"][0]["test_ppl"].get<double>() + row["seeds"][1]["test_ppl"].get<double>()) / 2;
    EXPECT_NEAR(row["test_ppl"].get<double>(), mean, 1e-9 * mean);
  }
  EXPECT_FALSE(report["table2"].contains("pretrain"));  // not asked for: no softmax model trained
  EXPECT_FALSE(std::filesystem::exists(dir / "runs/softmax-source-seed5"));
}

TEST(PaperTables, CausalityScoresBothFormsAndThePrefixMaxAgrees) {
  const TempDir dir;
  const json::Value report = run_table("causality", "", dir);
  const json::Value& rows = report["causality"]["rows"];
  ASSERT_EQ(rows.size(), 4u) << json::dump(report, 2);
  for (const json::Value& row : rows) {
    EXPECT_GT(row["tokens"].get<int64_t>(), 0);
    // The prefix max is causal: parallel and decoding compute the same function.
    if (row["key_max"] == "prefix") EXPECT_LT(std::abs(row["gap"].get<double>()), 1e-4) << json::dump(row);
  }
}

TEST(PaperTables, AnUnknownRowIsAUsageErrorNamingTheRows) {
  const Outcome o = run_linea("paper table4 --rows regla,nope --out /nonexistent/never");
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("no row 'nope'"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("hybrid-regla"), std::string::npos) << o.output;
  EXPECT_FALSE(std::filesystem::exists("/nonexistent/never"));
}

TEST(PaperTables, RowsNeedOneExperimentAndSeedsAtLeastOne) {
  Outcome o = run_linea("paper all --rows regla --out /nonexistent/never");
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("not of 'all'"), std::string::npos) << o.output;
  o = run_linea("paper theorem --rows regla --out /nonexistent/never");  // theorem has no rows
  EXPECT_EQ(o.status, 2) << o.output;
  o = run_linea("paper table6 --seeds 0 --out /nonexistent/never");
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("--seeds"), std::string::npos) << o.output;
}

}  // namespace
}  // namespace linea::cli
