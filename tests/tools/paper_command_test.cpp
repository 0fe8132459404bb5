// `linea paper` end to end, as a user runs it: experiments at --scale tiny write their
// Markdown, JSON and figures; an unknown experiment and a bad --scale are usage errors (exit 2).
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

void expect_files(const std::string& dir, const std::vector<std::string>& names) {
  for (const std::string& name : names)
    EXPECT_GT(std::filesystem::file_size(std::filesystem::path(dir) / name), 100u) << name;
}

TEST(PaperCommand, TheoremRunsAtTinyScale) {
  const TempDir dir;
  const Outcome o = run_linea("paper theorem --scale tiny --seed 1 --out " + dir.path());
  ASSERT_EQ(o.status, 0) << o.output;
  expect_files(dir.path(), {"theorem.md", "theorem.json", "theorem_figure2_inner_product.png",
                            "theorem_figure2_attention.png"});
  const json::Value report = json::parse(train::read_file(dir / "theorem.json", "test"));
  EXPECT_TRUE(report["inner_product"]["all_within"].get<bool>()) << json::dump(report["inner_product"], 2);
  EXPECT_NE(train::read_file(dir / "theorem.md", "test").find("| exp | 128 |"), std::string::npos);
}

TEST(PaperCommand, GatesRunsAtTinyScale) {
  const TempDir dir;
  const Outcome o =
      run_linea("paper gates --scale tiny --data " + testing::write_paper_corpus(dir) + " --out " + dir.path());
  ASSERT_EQ(o.status, 0) << o.output;
  expect_files(dir.path(), {"gates.md", "gates.json", "gates_figure3.png", "gates_figure4_sigmoid.png",
                            "gates_figure4_refined.png"});
  const json::Value report = json::parse(train::read_file(dir / "gates.json", "test"));
  EXPECT_LT(report["figure3"]["max_abs_error"].get<double>(), 1e-12);
  EXPECT_EQ(report["figure4"]["runs"].size(), 4u);
}

TEST(PaperCommand, DecodeTimesEveryMixerAtEveryLength) {
  const TempDir dir;
  const Outcome o = run_linea("paper decode --scale tiny --out " + dir.path());
  ASSERT_EQ(o.status, 0) << o.output;
  expect_files(dir.path(), {"decode.md", "decode.json", "decode_figure5_time.png", "decode_figure5_memory.png"});
  const json::Value report = json::parse(train::read_file(dir / "decode.json", "test"));
  for (const char* letter : {"R", "F", "S"}) {
    const json::Value& points = report["decode"]["letters"][letter]["points"];
    ASSERT_EQ(points.size(), 4u) << letter;  // N = 16, 32, 64, 128
    for (size_t i = 0; i < points.size(); ++i) {
      EXPECT_EQ(points[i]["n"].get<int64_t>(), int64_t{16} << i) << letter;
      EXPECT_GT(points[i]["ms"].get<double>(), 0.0) << letter;
    }
  }
  EXPECT_NE(train::read_file(dir / "decode.md", "test").find("| 128 |"), std::string::npos);
}

TEST(PaperCommand, AnUnknownExperimentListsTheKnownOnes) {
  const Outcome o = run_linea("paper theorm --out /nonexistent/never");
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("unknown experiment 'theorm'"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("theorem, gates"), std::string::npos) << o.output;
  EXPECT_NE(o.output.find("did you mean 'theorem'"), std::string::npos) << o.output;
}

TEST(PaperCommand, ABadScaleIsAUsageError) {
  const Outcome o = run_linea("paper theorem --scale huge --out /nonexistent/never");
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("huge"), std::string::npos) << o.output;
  EXPECT_FALSE(std::filesystem::exists("/nonexistent/never"));
}

TEST(PaperCommand, HelpListsTheExperiments) {
  const Outcome o = run_linea("paper --help");
  EXPECT_EQ(o.status, 0) << o.output;
  EXPECT_NE(o.output.find("theorem"), std::string::npos);
  EXPECT_NE(o.output.find("gates"), std::string::npos);
}

}  // namespace
}  // namespace linea::cli
