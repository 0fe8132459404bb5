// The `linea` program as a user runs it: exit statuses (0 success, 1 failure, 2 usage) and the
// output contract scripts rely on (`linea eval` ends with "loss=<x> ppl=<y>", `linea gradcheck`
// with "N passed, M failed").
#include <filesystem>
#include <regex>
#include <string>

#include "tests/test_util.h"
#include "tests/tools/run_linea.h"
#include "tests/train/temp_dir.h"
#include "train/file_io.h"

namespace linea::cli {
namespace {

using linea::testing::TempDir;

std::string last_line(const std::string& text) {
  const size_t end = text.find_last_not_of('\n');
  const size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
}

TEST(CliEndToEnd, HelpAndUsageErrors) {
  EXPECT_EQ(run_linea("--help").status, 0);
  EXPECT_EQ(run_linea("train --help").status, 0);
  const Outcome unknown = run_linea("trian");
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.output.find("trian"), std::string::npos);
  EXPECT_EQ(run_linea("train --steps abc").status, 2);
  EXPECT_EQ(run_linea("train --no-such-flag 1").status, 2);
  EXPECT_EQ(run_linea("eval").status, 2);  // --checkpoint is required
}

TEST(CliEndToEnd, TrainEvalGenerate) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the quick brown fox " + std::to_string(i % 7) + " jumps over the lazy dog.\n";
  train::write_file_atomically(dir / "corpus.txt", text);
  const std::string common = "--data " + dir / "corpus.txt" + " --cache-dir none ";
  const Outcome trained = run_linea("train " + common + "--model RS --d-model 16 --heads 2 --steps 6 --batch 2 --seq 16 "
                                    "--warmup 1 --eval-every 3 --sample-tokens 10 --out " + dir / "run");
  ASSERT_EQ(trained.status, 0) << trained.output;
  EXPECT_NE(trained.output.find("valid loss"), std::string::npos);
  EXPECT_NE(trained.output.find("sample:"), std::string::npos);

  const Outcome evaluated = run_linea("eval --checkpoint " + dir / "run" + " --data " + dir / "corpus.txt" +
                                      " --split test --cache-dir none");
  ASSERT_EQ(evaluated.status, 0) << evaluated.output;
  EXPECT_TRUE(std::regex_match(last_line(evaluated.output), std::regex(R"(loss=[0-9.]+ ppl=[0-9.]+)")))
      << last_line(evaluated.output);

  const Outcome generated = run_linea("generate --checkpoint " + dir / "run" + " --prompt 'the ' --tokens 12 --seed 3");
  ASSERT_EQ(generated.status, 0) << generated.output;
  EXPECT_EQ(generated.output.rfind("the ", 0), 0u);
  EXPECT_EQ(generated.output, run_linea("generate --checkpoint " + dir / "run" + " --prompt 'the ' --tokens 12 --seed 3").output);

  // Resuming with a changed model is refused; with more steps it continues.
  EXPECT_EQ(run_linea("train " + common + "--resume --out " + dir / "run" + " --d-model 32").status, 2);
  const Outcome resumed = run_linea("train " + common + "--resume --steps 8 --sample-tokens 0 --out " + dir / "run");
  EXPECT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("trained 8 steps"), std::string::npos) << resumed.output;
}

// `linea linearize` on a trained softmax run: the stages in --help, both stages run, and the run
// directory it writes is one that eval, generate and train --resume read.
TEST(CliEndToEnd, LinearizeATrainedSoftmaxRun) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the quick brown fox " + std::to_string(i % 7) + " jumps over the lazy dog.\n";
  train::write_file_atomically(dir / "corpus.txt", text);
  const Outcome help = run_linea("linearize --help");
  EXPECT_EQ(help.status, 0);
  for (const char* word : {"stage 1", "attention transfer", "stage 2", "--transfer-steps", "--lora-rank", "--resume"})
    EXPECT_NE(help.output.find(word), std::string::npos) << word;

  ASSERT_EQ(run_linea("train --data " + dir / "corpus.txt" + " --cache-dir none --model SS --d-model 16 --heads 2 "
                      "--steps 4 --batch 2 --seq 16 --warmup 1 --sample-tokens 0 --out " + dir / "softmax").status, 0);
  const std::string source = "--checkpoint " + dir / "softmax" + " ";
  const Outcome linearized = run_linea("linearize " + source + "--model SR --transfer-steps 3 --steps 3 --warmup 1 "
                                       "--sample-tokens 0 --lora-rank 2 --out " + dir / "hybrid");
  ASSERT_EQ(linearized.status, 0) << linearized.output;
  EXPECT_NE(linearized.output.find("validation MSE per replaced layer"), std::string::npos) << linearized.output;
  EXPECT_NE(linearized.output.find("test loss"), std::string::npos) << linearized.output;
  EXPECT_EQ(run_linea("eval --checkpoint " + dir / "hybrid").status, 0);
  EXPECT_EQ(run_linea("generate --checkpoint " + dir / "hybrid" + " --prompt 'the ' --tokens 4").status, 0);
  const Outcome more = run_linea("train --resume --steps 4 --sample-tokens 0 --out " + dir / "hybrid");
  EXPECT_EQ(more.status, 0) << more.output;

  EXPECT_EQ(run_linea("linearize " + source + "--out " + dir / "x").status, 2);  // --model is required
  const Outcome missing = run_linea("linearize --checkpoint " + dir / "none" + " --model RR --out " + dir / "y");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("does not exist"), std::string::npos) << missing.output;
  const Outcome griffin = run_linea("linearize " + source + "--model SU --out " + dir / "z");
  EXPECT_EQ(griffin.status, 1);
  EXPECT_NE(griffin.output.find("letter U (griffin) has no projection"), std::string::npos) << griffin.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "z"));  // refused before anything was written
}

// A prompt the checkpoint's tokenizer cannot encode is refused, naming what it cannot encode;
// --drop-unknown goes on without it, with a warning.
TEST(CliEndToEnd, GenerateRefusesAPromptItCannotEncode) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog.\n";
  train::write_file_atomically(dir / "corpus.txt", text);
  const std::string tiny = "--data " + dir / "corpus.txt" + " --cache-dir none --model R --d-model 16 --heads 2 "
                           "--steps 1 --batch 2 --seq 16 --warmup 0 --eval-every 0 --sample-tokens 0 --out ";
  ASSERT_EQ(run_linea("train " + tiny + dir / "chars").status, 0);
  const std::string generate = "generate --tokens 5 --seed 1 --checkpoint " + dir / "chars";

  const Outcome refused = run_linea(generate + " --prompt 'the Zé€ fox'");
  EXPECT_EQ(refused.status, 1);
  for (const char* part : {"3 characters that the checkpoint's char tokenizer cannot encode",
                           "'Z' (U+005A) at character 5", "'é' (U+00E9) at character 6", "'€' (U+20AC) at character 7",
                           "--drop-unknown"})
    EXPECT_NE(refused.output.find(part), std::string::npos) << part << "\n" << refused.output;
  // Control characters and bytes that are not UTF-8 are shown escaped.
  const Outcome odd = run_linea(generate + " --prompt \"$(printf 'the \\377\\tx')\"");
  EXPECT_EQ(odd.status, 1);
  for (const char* part : {"'\\xFF' (a byte that is not UTF-8) at character 5", "'\\t' (U+0009) at character 6"})
    EXPECT_NE(odd.output.find(part), std::string::npos) << part << "\n" << odd.output;
  // At most five are listed.
  const Outcome many = run_linea(generate + " --prompt ABCDEFGH");
  EXPECT_EQ(many.status, 1);
  EXPECT_NE(many.output.find("'E' (U+0045) at character 5 and 3 more"), std::string::npos) << many.output;
  EXPECT_EQ(many.output.find("'F'"), std::string::npos) << many.output;

  // --drop-unknown: a warning naming them, then exactly the text of the prompt without them.
  const Outcome dropped = run_linea(generate + " --prompt 'the Zé€ fox' --drop-unknown");
  ASSERT_EQ(dropped.status, 0) << dropped.output;
  const size_t warning_end = dropped.output.find('\n');
  EXPECT_NE(dropped.output.substr(0, warning_end).find("warning: dropped from the prompt 3 characters"),
            std::string::npos) << dropped.output;
  EXPECT_EQ(dropped.output.substr(warning_end + 1), run_linea(generate + " --prompt 'the  fox'").output);

  // A word tokenizer names words; <unk> itself is in its vocabulary.
  ASSERT_EQ(run_linea("train --tokenizer word " + tiny + dir / "words").status, 0);
  const Outcome word = run_linea("generate --tokens 3 --checkpoint " + dir / "words" + " --prompt 'the zyzzyva fox'");
  EXPECT_EQ(word.status, 1);
  EXPECT_NE(word.output.find("1 word that the checkpoint's word tokenizer cannot encode: 'zyzzyva' at character 5"),
            std::string::npos) << word.output;
  EXPECT_EQ(run_linea("generate --tokens 3 --checkpoint " + dir / "words" + " --prompt 'the <unk> fox'").status, 0);
}

TEST(CliEndToEnd, FailuresExitWithStatusOne) {
  TempDir dir;
  const Outcome missing = run_linea("train --cache-dir none --data " + dir / "nothing.txt" + " --out " + dir / "r");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("linea: error:"), std::string::npos);
  EXPECT_NE(missing.output.find("nothing.txt"), std::string::npos);
  const Outcome bad_checkpoint = run_linea("eval --checkpoint " + dir / "none");
  EXPECT_EQ(bad_checkpoint.status, 1);
  EXPECT_EQ(run_linea("train --model SQ --cache-dir none --out " + dir / "r").status, 1);
}

TEST(CliEndToEnd, GradcheckEndsWithItsTally) {
  const Outcome r = run_linea("gradcheck exp tanh");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(std::regex_match(last_line(r.output), std::regex(R"([0-9]+ passed, 0 failed)"))) << last_line(r.output);
}

}  // namespace
}  // namespace linea::cli
