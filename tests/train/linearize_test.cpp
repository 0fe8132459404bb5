// `linea linearize` end to end on a tiny softmax run (train/linearize.h): attention transfer
// lowers every replaced layer's error while its gradients reach only the new layers' own
// parameters; stopping in either stage and resuming gives bitwise the run never stopped; LoRA
// fine-tuning leaves the base weights alone and ends in a merged, plain checkpoint that eval and
// train --resume read; and bad input is refused clearly.
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "tests/test_util.h"
#include "tests/train/run_logs.h"
#include "tests/train/temp_dir.h"
#include "train/checkpoint.h"
#include "train/file_io.h"
#include "train/linearize.h"
#include "train/saved_model.h"
#include "train/trainable.h"

namespace linea::train {
namespace {

using linea::testing::all_close;
using linea::testing::quiet;
using linea::testing::TempDir;

std::string generated_text() {
  const char* words[] = {"the", "model", "learns", "a", "small", "corpus", "of", "words", "and", "gates",
                         "decay", "slowly", "while", "keys", "meet", "queries", "in", "linear", "time"};
  Generator gen(5);
  const std::vector<int64_t> picks = randint(0, 19, {1200}, kCPU, &gen).to_vector<int64_t>();
  std::string text;
  for (size_t i = 0; i < picks.size(); ++i) text += std::string(words[picks[i]]) + (i % 11 == 10 ? ".\n" : " ");
  return text;
}

// A trained two-layer softmax model, the source of every test here.
std::string train_source(const TempDir& dir) {
  write_file_atomically(dir / "corpus.txt", generated_text());
  TrainOptions o;
  o.data = dir / "corpus.txt";
  o.cache_dir = "none";
  o.model = "SS";
  o.d_model = 16;
  o.heads = 2;
  o.steps = 8;
  o.batch = 4;
  o.seq = 16;
  o.warmup = 2;
  o.eval_every = 0;
  o.eval_batches = 2;
  o.sample_tokens = 0;
  o.out = dir / "source";
  std::FILE* null = quiet();
  train_model(o, null);
  std::fclose(null);
  return o.out;
}

LinearizeOptions linearize_options(const std::string& source, const std::string& pattern, const std::string& out) {
  LinearizeOptions lo;
  lo.checkpoint = source;
  lo.transfer_steps = 6;
  lo.transfer_lr = 1e-2;
  lo.train = linearized_train_options(load_source_run(source), pattern, out);
  lo.train.steps = 6;
  lo.train.save_every = 2;
  lo.train.eval_every = 5;  // not at a step the resume test stops after: that would abandon it
  lo.train.sample_tokens = 6;
  return lo;
}

// Every record of a log but its timings, one per line: two runs that computed the same thing
// give the same text.
std::string log_without_times(const std::string& path) {
  std::istringstream in(read_file(path, "log"));
  std::string line, out;
  while (std::getline(in, line)) {
    json::Value r = json::parse(line);
    const std::string kind = json::get<std::string>(r, "kind");
    if (kind != "step" && kind != "transfer_step" && kind != "eval" && kind != "transfer_eval" && kind != "sample")
      continue;
    for (const char* timing : {"time_s", "step_s", "tokens_per_s"}) r.erase(timing);
    out += json::dump(r) + "\n";
  }
  return out;
}

TEST(LinearizeTraining, TransferLowersEveryLayersErrorAndTrainsOnlyTheNewParameters) {
  TempDir dir;
  const SourceRun source = load_source_run(train_source(dir));
  Generator gen(1);
  nn::LanguageModel teacher(source.config, gen);
  teacher.load_state_dict(source.checkpoint.model);
  nn::ModelConfig target = source.config;
  target.pattern = "RR";
  nn::LanguageModel student(target, gen);
  const nn::Linearization lin = nn::copy_linearized_weights(source.config, source.checkpoint.model, student);
  const std::vector<nn::NamedParameter> trainable =
      freeze_all_but(student, [&](const std::string& n) { return transfer_trains(lin, n, false); }, "test");
  TrainOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0;
  const auto optimizer = make_optimizer(o, trainable);

  const Tensor ids = randint(0, source.config.vocab_size, {4, 16}, kCPU, &gen);
  std::vector<double> first;
  for (int step = 0; step < 25; ++step) {
    optimizer->zero_grad();
    const std::vector<Tensor> losses = transfer_losses(teacher, student, lin.replaced, ids);
    ASSERT_EQ(losses.size(), 2u);
    if (step == 0) {
      for (const Tensor& l : losses) first.push_back(l.item());
      backward(losses[0] + losses[1]);
      // The gradients reach exactly the trainable parameters: the new layers' gates and norms.
      for (const nn::NamedParameter& p : student.named_parameters()) {
        const bool trains = transfer_trains(lin, p.name, false);
        EXPECT_EQ(p.tensor.grad().defined(), trains) << p.name;
        if (trains) EXPECT_NE(p.name.find(".mixer."), std::string::npos) << p.name;
      }
      for (const nn::NamedParameter& p : teacher.named_parameters()) EXPECT_FALSE(p.tensor.grad().defined()) << p.name;
    } else {
      backward(losses[0] + losses[1]);
    }
    optimizer->step();
  }
  const std::vector<Tensor> last = transfer_losses(teacher, student, lin.replaced, ids);
  for (size_t l = 0; l < last.size(); ++l) EXPECT_LT(last[l].item(), 0.9 * first[l]) << "layer " << l;
  // With transfer_qkvo the copied projections of the replaced layers train too, nothing else.
  EXPECT_TRUE(transfer_trains(lin, "blocks.0.mixer.q_proj.weight", true));
  EXPECT_FALSE(transfer_trains(lin, "blocks.0.mixer.q_proj.weight", false));
  EXPECT_FALSE(transfer_trains(lin, "blocks.0.mlp.up.weight", true));
}

// Stopped after transfer step 3, after fine-tuning step 3 and after step 4 (between saves), then
// resumed: the logs and the result are bitwise the uninterrupted run's.
TEST(LinearizeTraining, ResumeInEitherStageIsBitwise) {
  TempDir dir;
  const std::string source = train_source(dir);
  std::FILE* null = quiet();
  const LinearizeOptions whole = linearize_options(source, "SR", dir / "whole");
  const LinearizeResult full = linearize(whole, false, null);
  ASSERT_FALSE(full.stopped);
  ASSERT_EQ(full.transfer.mse_after.size(), 1u);
  EXPECT_LT(full.transfer.mse_after[0], full.transfer.mse_before[0]);

  struct StopAt {
    const char* stage;
    int64_t step;
  };
  for (const StopAt at : {StopAt{"transfer", 3}, StopAt{"finetune", 3}, StopAt{"finetune", 4}}) {
    LinearizeOptions lo = whole;
    lo.train.out = dir / (std::string(at.stage) + std::to_string(at.step));
    const std::string log = at.stage == std::string("transfer") ? lo.train.out + "/transfer/log.jsonl"
                                                                : lo.train.out + "/log.jsonl";
    const std::string kind = at.stage == std::string("transfer") ? "\"transfer_step\"" : "\"kind\":\"step\"";
    const auto stop = [&] {
      if (!std::filesystem::exists(log)) return false;
      const std::string text = read_file(log, "log");
      int64_t n = 0;
      for (size_t p = text.find(kind); p != std::string::npos; p = text.find(kind, p + 1)) ++n;
      return n >= at.step;
    };
    const LinearizeResult stopped = linearize(lo, false, null, stop);
    EXPECT_TRUE(stopped.stopped);
    EXPECT_EQ(stopped.stage, at.stage);
    const LinearizeResult resumed = linearize(lo, true, null);
    EXPECT_FALSE(resumed.stopped);
    EXPECT_EQ(log_without_times(lo.train.out + "/transfer/log.jsonl"),
              log_without_times(whole.train.out + "/transfer/log.jsonl"))
        << at.stage << " " << at.step;
    EXPECT_EQ(log_without_times(lo.train.out + "/log.jsonl"), log_without_times(whole.train.out + "/log.jsonl"))
        << at.stage << " " << at.step;
    EXPECT_EQ(resumed.train.test_loss, full.train.test_loss);
    EXPECT_EQ(resumed.train.sample, full.train.sample);
    EXPECT_EQ(resumed.transfer.mse_after, full.transfer.mse_after);
  }
  std::fclose(null);
}

// --precision bf16 reaches both stages: the attention transfer's error still falls, close to the
// float32 run's but not equal to it (its products were rounded), and the fine-tuning follows.
TEST(LinearizeTraining, Bf16RunsBothStagesInMixedPrecision) {
  TempDir dir;
  const std::string source = train_source(dir);
  std::FILE* null = quiet();
  const LinearizeResult fp32 = linearize(linearize_options(source, "SR", dir / "fp32"), false, null);
  LinearizeOptions lo = linearize_options(source, "SR", dir / "bf16");
  lo.train.precision = "bf16";
  const LinearizeResult bf16 = linearize(lo, false, null);
  std::fclose(null);
  ASSERT_EQ(bf16.transfer.mse_before.size(), 1u);
  EXPECT_LT(bf16.transfer.mse_after[0], bf16.transfer.mse_before[0]);
  EXPECT_NE(bf16.transfer.mse_before[0], fp32.transfer.mse_before[0]);
  EXPECT_NEAR(bf16.transfer.mse_after[0], fp32.transfer.mse_after[0], 0.05 * fp32.transfer.mse_after[0]);
  EXPECT_NEAR(bf16.train.test_loss, fp32.train.test_loss, 0.02 * fp32.train.test_loss);
}

TEST(LinearizeTraining, LoraKeepsTheBaseAndEndsMergedInAnOrdinaryRun) {
  TempDir dir;
  const std::string source = train_source(dir);
  LinearizeOptions lo = linearize_options(source, "RR", dir / "lora");
  lo.transfer_steps = 0;
  lo.train.lora_rank = 2;
  lo.train.lora_targets = "q,k,v,o,mlp";
  lo.train.lr = 1e-2;
  std::FILE* null = quiet();
  const LinearizeResult r = linearize(lo, false, null);
  ASSERT_FALSE(r.stopped);

  // A mid-run checkpoint: unmerged adapters, base weights still the copied ones.
  const Checkpoint mid = load_checkpoint(lo.train.out + "/step-00000004");
  EXPECT_TRUE(nn::ModelConfig::from_json(mid.config).lora.enabled());
  const Checkpoint trained = load_checkpoint(*latest_checkpoint(source));
  int adapters = 0;
  for (const auto& [name, t] : mid.model) {
    if (nn::is_lora_parameter(name)) ++adapters;
    else if (trained.model.count(name)) EXPECT_TRUE(all_close(t, trained.model.at(name), 0, 0)) << name;
  }
  EXPECT_EQ(adapters, 2 * 2 * 7);  // q, k, v, out and the three MLP projections, in both layers

  // The final checkpoint is a plain model: no adapters, a config and options without LoRA.
  const SavedModel saved = load_saved_model(lo.train.out, kCPU);
  EXPECT_FALSE(saved.model->config().lora.enabled());
  for (const auto& [name, t] : saved.checkpoint.model) EXPECT_FALSE(nn::is_lora_parameter(name)) << name;
  EXPECT_EQ(json::get<int64_t>(json::at(saved.checkpoint.trainer.extra, "options", "extra"), "lora_rank"), 0);
  // ... that `linea train --resume` continues as an ordinary run.
  TrainOptions more;
  more.update_from_json(json::at(saved.checkpoint.trainer.extra, "options", "extra"));
  more.resume = true;
  more.steps = 8;
  EXPECT_EQ(train_model(more, null).steps, 8);
  std::fclose(null);
}

TEST(LinearizeTraining, RefusesBadInput) {
  TempDir dir;
  const std::string source = train_source(dir);
  std::FILE* null = quiet();
  LinearizeOptions lo = linearize_options(source, "RR", dir / "out");
  EXPECT_LINEA_ERROR(load_source_run(dir / "missing"), "the trained run", "does not exist");
  lo.checkpoint = dir / "missing";
  EXPECT_LINEA_ERROR(linearize(lo, false, null), "does not exist");
  lo = linearize_options(source, "RRR", dir / "out");
  EXPECT_LINEA_ERROR(linearize(lo, false, null), "RRR has 3 layers");
  lo = linearize_options(source, "RR", dir / "out");
  EXPECT_LINEA_ERROR(linearize(lo, true, null), "--resume", "holds no linearization");
  lo.transfer_steps = -1;
  EXPECT_LINEA_ERROR(linearize(lo, false, null), "--transfer-steps must be >= 0");
  lo = linearize_options(source, "RR", source);  // the trained run's own directory
  EXPECT_LINEA_ERROR(linearize(lo, false, null), "already holds a run");
  std::fclose(null);
}

}  // namespace
}  // namespace linea::train
