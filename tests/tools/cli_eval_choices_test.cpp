// `linea eval --choices` as a user runs it: a trained checkpoint scores a JSON-lines file of
// multiple-choice items zero- and one-shot, prints the accuracies last and writes each item's
// scores; items it cannot score and flags without --choices are refused with a message.
#include <string>

#include "nn/json.h"
#include "tests/test_util.h"
#include "tests/tools/run_linea.h"
#include "tests/train/temp_dir.h"
#include "train/file_io.h"

namespace linea::cli {
namespace {

using linea::testing::TempDir;

class CliEvalChoices : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text;
    for (int i = 0; i < 200; ++i) text += "the quick brown fox " + std::to_string(i % 5) + " jumps over the lazy dog.\n";
    train::write_file_atomically(dir_ / "corpus.txt", text);
    const Outcome trained = run_linea("train --data " + dir_ / "corpus.txt" + " --cache-dir none --model SR "
                                      "--d-model 16 --heads 2 --steps 2 --batch 2 --seq 16 --warmup 0 "
                                      "--eval-every 0 --sample-tokens 0 --out " + dir_ / "run");
    ASSERT_EQ(trained.status, 0) << trained.output;
    train::write_file_atomically(dir_ / "items.jsonl",
                                 R"({"context": "the quick brown", "endings": [" fox", " dog", " lazy"], "label": 0})"
                                 "\n"
                                 R"({"context": "jumps over the", "endings": [" lazy dog.", " fox"], "label": 0})"
                                 "\n\n"
                                 R"({"context": "the lazy", "endings": [" dog.", " quick"], "label": 0})"
                                 "\n");
  }
  std::string eval(const std::string& args) const { return "eval --checkpoint " + dir_ / "run" + " " + args; }
  TempDir dir_;
};

TEST_F(CliEvalChoices, ScoresEveryItemAndWritesTheirScores) {
  for (const char* shots : {"0", "1"}) {
    const Outcome o = run_linea(eval("--choices " + dir_ / "items.jsonl" + " --shots " + shots + " --out " +
                                     dir_ / "scores.jsonl"));
    ASSERT_EQ(o.status, 0) << o.output;
    EXPECT_NE(o.output.find(std::string(shots) + "-shot"), std::string::npos) << o.output;
    const size_t last = o.output.rfind("items=3 acc=");
    ASSERT_NE(last, std::string::npos) << o.output;
    const std::vector<json::Value> scores = json::parse_lines(train::read_file(dir_ / "scores.jsonl", "test"));
    ASSERT_EQ(scores.size(), 3u);
    EXPECT_EQ(scores[0]["log_likelihoods"].size(), 3u);
    EXPECT_EQ(scores[2]["item"].get<int64_t>(), 3);
    for (const auto& s : scores)
      for (const auto& ll : s["log_likelihoods"]) EXPECT_LT(ll.get<double>(), 0.0);
  }
}

TEST_F(CliEvalChoices, WhatCannotBeScoredIsRefused) {
  train::write_file_atomically(dir_ / "bad.jsonl", R"({"context": "the", "endings": [" fox", " QUIZ"], "label": 0})");
  const Outcome unknown = run_linea(eval("--choices " + dir_ / "bad.jsonl"));
  EXPECT_NE(unknown.status, 0);
  EXPECT_NE(unknown.output.find("cannot encode 'Q'"), std::string::npos) << unknown.output;
  const Outcome too_many = run_linea(eval("--choices " + dir_ / "items.jsonl --shots 3"));
  EXPECT_NE(too_many.status, 0);
  EXPECT_NE(too_many.output.find("3-shot prompts need more than 3 items"), std::string::npos) << too_many.output;
  const Outcome stray = run_linea(eval("--shots 2"));
  EXPECT_EQ(stray.status, 2);
  EXPECT_NE(stray.output.find("go with --choices"), std::string::npos) << stray.output;
}

}  // namespace
}  // namespace linea::cli
