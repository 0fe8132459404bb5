// The trainer end to end on a tiny model and a generated corpus: deterministic runs, bitwise
// identical resumes, NaN stops that keep the last checkpoint, and bad input refused clearly.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/test_util.h"
#include "tests/train/run_logs.h"
#include "tests/train/temp_dir.h"
#include "train/checkpoint.h"
#include "train/corpus.h"
#include "train/evaluate.h"
#include "train/file_io.h"
#include "train/generate.h"
#include "train/saved_model.h"
#include "train/trainer.h"

namespace linea::train {
namespace {

using linea::testing::generated_text;
using linea::testing::logged_losses;
using linea::testing::quiet;
using linea::testing::tiny_train_options;
using linea::testing::TempDir;

void write_corpus(const TempDir& dir) { write_file_atomically(dir / "corpus.txt", generated_text(5)); }

TEST(Trainer, SameSeedSameLosses) {
  TempDir dir;
  write_corpus(dir);
  std::FILE* null = quiet();
  const TrainResult a = train_model(tiny_train_options(dir, "a"), null);
  const TrainResult b = train_model(tiny_train_options(dir, "b"), null);
  std::fclose(null);
  EXPECT_EQ(logged_losses(dir / "a"), logged_losses(dir / "b"));
  EXPECT_EQ(a.test_loss, b.test_loss);
  EXPECT_EQ(a.sample, b.sample);
  EXPECT_EQ(logged_losses(dir / "a").size(), 12u);
  EXPECT_TRUE(std::isfinite(a.valid_ppl));
  EXPECT_LT(a.valid_loss, std::log(static_cast<double>(30)));  // better than uniform over the characters
}

void expect_bitwise_resume(const std::string& precision) {
  TempDir dir;
  write_corpus(dir);
  std::FILE* null = quiet();
  TrainOptions full = tiny_train_options(dir, "full");
  full.precision = precision;
  full.dropout = 0.1;  // the dropout stream must resume too
  train_model(full, null);

  TrainOptions first = full;
  first.out = dir / "split";
  first.steps = 12;
  first.save_every = 6;
  // Interrupt after step 6: train 6 steps of a 12-step schedule by stopping at the checkpoint.
  // The simplest faithful interruption is a run whose log and checkpoints we cut back: run to the
  // end, then resume from the step-6 checkpoint after removing the later ones.
  train_model(first, null);
  namespace fs = std::filesystem;
  for (const auto& entry : fs::directory_iterator(first.out))
    if (entry.path().filename().string().rfind("step-00000012", 0) == 0) fs::remove_all(entry.path());
  write_file_atomically(first.out + "/LATEST", "step-00000006\n");
  TrainOptions resumed = first;
  resumed.resume = true;
  train_model(resumed, null);
  std::fclose(null);
  EXPECT_EQ(logged_losses(full.out), logged_losses(first.out));
}

TEST(Trainer, ResumeIsBitwiseIdentical) { expect_bitwise_resume("fp32"); }
// The master weights and the optimizer state are float32 in a bf16 run as well, and they are
// what the checkpoint holds: the bfloat16 copies are made again from them each step.
TEST(Trainer, Bf16ResumeIsBitwiseIdentical) { expect_bitwise_resume("bf16"); }

// --precision bf16 (nn/precision.h) follows the float32 run: the same data and initial weights,
// the products rounded to bfloat16. Over 300 steps of the tiny model each step's loss stays within
// 1% of the float32 run's (measured: 0.25% at most), and the runs do differ at nearly every step
// (the setting takes effect: the products are rounded).
TEST(Trainer, Bf16LossesFollowTheFp32Run) {
  TempDir dir;
  write_corpus(dir);
  std::FILE* null = quiet();
  TrainOptions o = tiny_train_options(dir, "fp32");
  o.steps = 300;
  o.warmup = 10;
  o.eval_every = 0;
  o.save_every = 0;
  o.sample_tokens = 0;
  train_model(o, null);
  o.precision = "bf16";
  o.out = dir / "bf16";
  train_model(o, null);
  std::fclose(null);
  const auto fp32 = logged_losses(dir / "fp32"), bf16 = logged_losses(dir / "bf16");
  ASSERT_EQ(fp32.size(), 300u);
  ASSERT_EQ(bf16.size(), 300u);
  double largest = 0;
  int differ = 0;
  for (const auto& [step, a] : fp32) {
    const double b = bf16.at(step);
    largest = std::max(largest, std::abs(b - a) / a);
    differ += a != b;
  }
  EXPECT_LT(largest, 0.01);
  EXPECT_GT(differ, 250);
  std::printf("bf16 vs fp32 over 300 steps: largest relative loss difference %.4f, %d steps differ\n", largest, differ);
  EXPECT_LT(bf16.at(300), bf16.at(1) - 0.5);  // and it learns
}

// A stop request (what `linea train` makes of Ctrl-C) ends the run at a checkpoint of its last
// completed step, and --resume from there gives bitwise the losses, test loss and sample of a run
// never stopped: before the first step, right after the step-6 save (nothing new to write), and
// mid-interval at step 7.
TEST(Trainer, StopRequestSavesTheStepAndResumeContinuesBitwise) {
  TempDir dir;
  write_corpus(dir);
  std::FILE* null = quiet();
  TrainOptions full = tiny_train_options(dir, "full");
  full.dropout = 0.1;
  const TrainResult whole = train_model(full, null);
  for (const int64_t stop_at : {0, 6, 7}) {
    TrainOptions o = full;
    o.out = dir / ("stop" + std::to_string(stop_at));
    // Asked before each step and each evaluation batch: true once stop_at steps are logged.
    const auto after_stop_at = [&] { return static_cast<int64_t>(logged_losses(o.out).size()) >= stop_at; };
    const TrainResult stopped = train_model(o, null, after_stop_at);
    EXPECT_TRUE(stopped.stopped);
    EXPECT_EQ(stopped.steps, stop_at);
    char name[32];
    std::snprintf(name, sizeof name, "/step-%08lld", static_cast<long long>(stop_at));
    EXPECT_EQ(stopped.checkpoint, o.out + name);  // one checkpoint per step: no "-1" re-save
    EXPECT_EQ(latest_checkpoint(o.out), stopped.checkpoint);
    EXPECT_EQ(load_checkpoint(stopped.checkpoint).trainer.step, stop_at);
    EXPECT_NE(read_file(o.out + "/log.jsonl", "log").find("\"kind\":\"stopped\""), std::string::npos);

    o.resume = true;
    const TrainResult resumed = train_model(o, null);
    EXPECT_FALSE(resumed.stopped);
    EXPECT_EQ(resumed.steps, 12);
    EXPECT_EQ(logged_losses(o.out), logged_losses(full.out)) << "stopped at " << stop_at;
    EXPECT_EQ(resumed.test_loss, whole.test_loss);
    EXPECT_EQ(resumed.sample, whole.sample);
  }
  std::fclose(null);
}

// A stop request during a periodic evaluation abandons it at its next batch: no partial result
// is logged, and the checkpoint holds the step before it.
TEST(Trainer, StopRequestAbandonsAnEvaluationInProgress) {
  TempDir dir;
  write_corpus(dir);
  std::FILE* null = quiet();
  TrainOptions o = tiny_train_options(dir, "run");  // evaluates at step 4
  int64_t asked_after_four = 0;
  const auto during_the_step_4_evaluation = [&] {
    if (logged_losses(o.out).size() < 4) return false;
    return ++asked_after_four >= 2;  // asked before each batch: the first runs, the second does not
  };
  const TrainResult r = train_model(o, null, during_the_step_4_evaluation);
  std::fclose(null);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.steps, 4);
  EXPECT_EQ(load_checkpoint(r.checkpoint).trainer.step, 4);
  EXPECT_EQ(read_file(o.out + "/log.jsonl", "log").find("\"kind\":\"eval\""), std::string::npos);
}

TEST(Trainer, NanStopsTrainingAndKeepsTheLastCheckpoint) {
  TempDir dir;
  write_corpus(dir);
  std::FILE* null = quiet();
  TrainOptions o = tiny_train_options(dir, "nan");
  o.steps = 12;
  o.save_every = 1;  // a checkpoint after every good step
  o.clip = 0;
  o.warmup = 0;
  o.schedule = "constant";
  o.lr = 1e6;  // diverges within a few steps
  o.min_lr = 1e6;
  EXPECT_LINEA_ERROR(train_model(o, null), "training stopped");
  std::fclose(null);
  // The first step starts from a finite loss and is saved; the divergence comes after it.
  const std::optional<std::string> latest = latest_checkpoint(o.out);
  ASSERT_TRUE(latest.has_value());
  const Checkpoint ck = load_checkpoint(*latest);
  EXPECT_GE(ck.trainer.step, 1);
  EXPECT_LT(ck.trainer.step, 12);
}

TEST(Trainer, EvalOfTheCheckpointMatchesTheTrainer) {
  TempDir dir;
  write_corpus(dir);
  std::FILE* null = quiet();
  const TrainOptions o = tiny_train_options(dir, "run");
  const TrainResult r = train_model(o, null);
  std::fclose(null);
  const SavedModel saved = load_saved_model(o.out, kCPU);
  CorpusOptions c;
  c.data = o.data;
  c.given_tokenizer = saved.tokenizer;
  c.log = [](const std::string&) {};
  const Corpus corpus = load_corpus(c);
  const EvalResult e = evaluate(*saved.model, corpus.test, o.batch, o.seq, kCPU);
  EXPECT_NEAR(e.loss, r.test_loss, 1e-12);
  // Greedy decoding is deterministic and stays in the vocabulary.
  const std::vector<int64_t> ids = generate(*saved.model, corpus.tokenizer->encode("the "), {.tokens = 5, .temperature = 0}, kCPU);
  EXPECT_EQ(ids.size(), 5u);
}

TEST(Trainer, RefusesBadInput) {
  TempDir dir;
  write_corpus(dir);
  std::FILE* null = quiet();
  TrainOptions o = tiny_train_options(dir, "bad");
  o.data = dir / "missing.txt";
  EXPECT_LINEA_ERROR(train_model(o, null), "missing.txt");
  write_file_atomically(dir / "empty.txt", "");
  o.data = dir / "empty.txt";
  EXPECT_LINEA_ERROR(train_model(o, null), "empty.txt");
  o = tiny_train_options(dir, "bad");
  o.model = "RQ";
  EXPECT_LINEA_ERROR(train_model(o, null), "unknown layer letter 'Q'");
  o = tiny_train_options(dir, "bad");
  o.lr = -1;
  EXPECT_LINEA_ERROR(train_model(o, null), "--lr");
  o = tiny_train_options(dir, "bad");
  o.resume = true;
  EXPECT_LINEA_ERROR(train_model(o, null), "no checkpoint to resume from");
  o = tiny_train_options(dir, "bad");
  o.layer_options = "{\"S\": ";
  EXPECT_LINEA_ERROR(train_model(o, null), "--layer-options");
  o = tiny_train_options(dir, "bad");
  o.warmup = o.steps + 1;
  EXPECT_LINEA_ERROR(train_model(o, null), "--warmup 13 is longer than the run (--steps 12)");
  o = tiny_train_options(dir, "bad");
  o.mlp_hidden = -2;
  EXPECT_LINEA_ERROR(train_model(o, null), "--mlp-hidden");
  std::fclose(null);
}

// The sample's prompt is checked as `linea generate` checks its own (train/prompt.h), before the
// first step: refused when the run's tokenizer cannot encode it, or with drop_unknown, sampled
// without those pieces after a warning naming them.
TEST(Trainer, SamplePromptTheTokenizerCannotEncode) {
  TempDir dir;
  write_corpus(dir);
  std::FILE* null = quiet();
  TrainOptions o = tiny_train_options(dir, "prompt");
  o.prompt = "The queries";
  EXPECT_LINEA_ERROR(train_model(o, null), "1 character that the run's char tokenizer cannot encode",
                     "'T' (U+0054) at character 1", "--drop-unknown");
  EXPECT_FALSE(std::filesystem::exists(o.out)) << "refused before training";
  o.sample_tokens = 0;  // no sample, no prompt to check
  EXPECT_NO_THROW(train_model(o, null));
  std::fclose(null);

  o = tiny_train_options(dir, "dropped");
  o.prompt = "The queries";
  o.drop_unknown = true;
  std::FILE* out = std::tmpfile();
  const TrainResult result = train_model(o, out);
  std::rewind(out);
  std::string printed;
  for (int c; (c = std::fgetc(out)) != EOF;) printed += static_cast<char>(c);
  std::fclose(out);
  EXPECT_NE(printed.find("warning: dropped from the prompt 1 character"), std::string::npos) << printed;
  EXPECT_EQ(result.sample.rfind("he queries", 0), 0u) << result.sample;
}

// A fresh run pointed at a directory that already holds one is refused, and the run there is
// left as it was: its log and its checkpoints.
TEST(Trainer, FreshRunDoesNotOverwriteAnExistingRun) {
  TempDir dir;
  write_corpus(dir);
  std::FILE* null = quiet();
  TrainOptions o = tiny_train_options(dir, "run");
  train_model(o, null);
  const std::string log_before = read_file(dir / "run/log.jsonl", "log");
  const std::optional<std::string> latest_before = latest_checkpoint(dir / "run");
  o.seed = 99;
  EXPECT_LINEA_ERROR(train_model(o, null), "already holds a run", "--resume");
  EXPECT_EQ(read_file(dir / "run/log.jsonl", "log"), log_before);
  EXPECT_EQ(latest_checkpoint(dir / "run"), latest_before);
  EXPECT_NO_THROW(load_checkpoint(*latest_before));
  std::fclose(null);
}

TEST(Sampling, TopKTopPAndTemperature) {
  const std::vector<double> logits = {0.0, 3.0, 1.0, 2.0};
  EXPECT_EQ(sample_from_logits(logits, {.temperature = 0}, 0.9), 1);
  // top_k = 1 leaves only the best.
  EXPECT_EQ(sample_from_logits(logits, {.temperature = 1, .top_k = 1}, 0.99), 1);
  // top_p small keeps the smallest set reaching it: the best token alone.
  EXPECT_EQ(sample_from_logits(logits, {.temperature = 1, .top_p = 0.5}, 0.99), 1);
  // With everything allowed, u near 1 reaches the least likely token.
  EXPECT_EQ(sample_from_logits(logits, {.temperature = 1}, 0.999999), 0);
}

}  // namespace
}  // namespace linea::train
