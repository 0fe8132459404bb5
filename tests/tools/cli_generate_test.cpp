// `linea generate` with several sequences (--num-samples, --prompts), run as a user runs it: every
// sample of a batch is the text the single run with its seed prints, and bad input is refused
// with a message that says what to change.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "tests/tools/run_linea.h"
#include "tests/train/temp_dir.h"
#include "train/file_io.h"

namespace linea::cli {
namespace {

using linea::testing::TempDir;

// A checkpoint of a small model with softmax and ReGLA layers, trained for two steps on a toy text.
class CliGenerate : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text;
    for (int i = 0; i < 200; ++i)
      text += "the quick brown fox " + std::to_string(i % 5) + " jumps over the lazy dog.\n";
    train::write_file_atomically(dir_ / "corpus.txt", text);
    const Outcome trained = run_linea("train --data " + dir_ / "corpus.txt" + " --cache-dir none --model SRS "
                                      "--d-model 16 --heads 2 --steps 2 --batch 2 --seq 16 --warmup 0 "
                                      "--eval-every 0 --sample-tokens 0 --out " + dir_ / "run");
    ASSERT_EQ(trained.status, 0) << trained.output;
  }

  std::string generate(const std::string& args) const {
    return "generate --checkpoint " + dir_ / "run" + " --tokens 9 --temperature 1 " + args;
  }
  // A prompts file holding `text`.
  std::string prompts_file(const std::string& name, const std::string& text) const {
    train::write_file_atomically(dir_ / name, text);
    return dir_ / name;
  }

  TempDir dir_;
};

// The samples of a batched run by their header line, each with the text under it.
std::map<std::string, std::string> samples_of(const std::string& output) {
  std::map<std::string, std::string> samples;
  std::string header;
  for (size_t start = 0; start < output.size();) {
    const size_t end = std::min(output.find('\n', start), output.size());
    const std::string line = output.substr(start, end - start);
    if (line.rfind("--- prompt ", 0) == 0) header = line, samples[header] = "";
    else if (!header.empty()) samples[header] += line + "\n";
    start = end + 1;
  }
  return samples;
}

TEST_F(CliGenerate, EverySampleIsWhatItsSeedGivesAlone) {
  const Outcome batch = run_linea(generate("--prompt 'the qu' --num-samples 3 --seed 5"));
  ASSERT_EQ(batch.status, 0) << batch.output;
  const auto samples = samples_of(batch.output);
  ASSERT_EQ(samples.size(), 3u) << batch.output;
  for (int i = 0; i < 3; ++i) {
    const std::string header =
        "--- prompt 1/1, sample " + std::to_string(i + 1) + "/3, seed " + std::to_string(5 + i) + " ---";
    ASSERT_TRUE(samples.count(header)) << header << "\n" << batch.output;
    const Outcome alone = run_linea(generate("--prompt 'the qu' --seed " + std::to_string(5 + i)));
    ASSERT_EQ(alone.status, 0) << alone.output;
    EXPECT_EQ(samples.at(header), alone.output) << header;
    EXPECT_EQ(alone.output.rfind("the qu", 0), 0u) << alone.output;
  }
}

// Prompts of different lengths in one batch, two samples each: every one is its single run.
TEST_F(CliGenerate, PromptsFromAFileRunAsOneBatch) {
  const std::string file = prompts_file("prompts.txt", "the lazy dog\r\nf\nover the quick brown fox 3 jumps\n");
  const Outcome batch = run_linea(generate("--prompts " + file + " --num-samples 2 --seed 1"));
  ASSERT_EQ(batch.status, 0) << batch.output;
  const auto samples = samples_of(batch.output);
  ASSERT_EQ(samples.size(), 6u) << batch.output;
  const std::vector<std::string> prompts{"the lazy dog", "f", "over the quick brown fox 3 jumps"};
  for (size_t p = 0; p < prompts.size(); ++p)
    for (int i = 0; i < 2; ++i) {
      const std::string header = "--- prompt " + std::to_string(p + 1) + "/3, sample " + std::to_string(i + 1) +
                                 "/2, seed " + std::to_string(1 + i) + " ---";
      const Outcome alone = run_linea(generate("--prompt '" + prompts[p] + "' --seed " + std::to_string(1 + i)));
      ASSERT_TRUE(samples.count(header)) << header << "\n" << batch.output;
      EXPECT_EQ(samples.at(header), alone.output) << header;
    }
}

TEST_F(CliGenerate, RefusesBadBatchesWithAClearMessage) {
  auto expect_refused = [&](const std::string& args, int status, const std::string& part) {
    const Outcome o = run_linea(generate(args));
    EXPECT_EQ(o.status, status) << args << "\n" << o.output;
    EXPECT_NE(o.output.find(part), std::string::npos) << args << "\n" << o.output;
  };
  expect_refused("--num-samples 0", 2, "--num-samples must be at least 1, got 0");
  expect_refused("--prompt 'the' --prompts " + prompts_file("one.txt", "the\n"), 2,
                 "give --prompt or --prompts, not both");
  expect_refused("--prompts " + prompts_file("empty.txt", ""), 1, "holds no prompt");
  expect_refused("--prompts " + prompts_file("gap.txt", "the\n\nfox\n"), 1, "line 2 of the prompts file");
  expect_refused("--prompts " + dir_ / "missing.txt", 1, "missing.txt");
  expect_refused("--prompts " + prompts_file("unknown.txt", "the\nthe Zebra\n"), 1,
                 "line 2 of the prompts file '" + dir_ / "unknown.txt" + "' holds 1 character");
  expect_refused("--prompt 'the quick' --max-length 5", 1, "the prompt is 9 tokens, longer than the maximum length 5");
  expect_refused("--prompt 'the' --max-length 10", 1, "ask for at most 7 new tokens");
  expect_refused("--max-length -1", 2, "--max-length must be >= 0");
  EXPECT_EQ(run_linea(generate("--prompt 'the' --max-length 12")).status, 0);  // 3 + 9 tokens: the limit
}

}  // namespace
}  // namespace linea::cli
