// Checkpoints: round trips, the LATEST pointer, pruning, refusal of damaged files, and that a
// save interrupted at any point leaves the previous checkpoint loadable.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/train/temp_dir.h"
#include "nn/model.h"
#include "tests/test_util.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/file_io.h"
#include "train/safetensors.h"

namespace linea::train {
namespace {

namespace fs = std::filesystem;

Checkpoint make_checkpoint(int64_t step) {
  Checkpoint c;
  c.model = {{"embed.weight", randn({5, 3})}, {"head.bias", full({5}, static_cast<double>(step))},
             {"mask", tensor({1, 0}, {2}, kBool)}};
  c.config = json::parse(R"({"d_model": 3, "mixer": "regla", "layers": [1, 2]})");
  c.optimizer = {"adamw", {{"exp_avg.embed.weight", randn({5, 3})}}, {{"lr", 3e-4 / 7}, {"step", static_cast<double>(step)}}};
  c.trainer.step = step;
  c.trainer.lr = 1.0 / 3.0;
  c.trainer.rng_seed = 0xfedcba9876543210ull;  // above INT64_MAX on purpose
  c.trainer.rng_offset = 123456789;
  c.trainer.data = json::parse(R"({"epoch": 2, "position": 1234567890123})");
  c.trainer.tokenizer = json::parse(R"({"kind": "bpe", "vocab_size": 512})");
  c.trainer.extra["best_loss"] = 2.5;
  return c;
}

void expect_same_tensors(const NamedTensors& actual, const NamedTensors& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, t] : expected) {
    ASSERT_TRUE(actual.count(name)) << name;
    EXPECT_EQ(actual.at(name).describe(), t.describe()) << name;
    EXPECT_EQ(actual.at(name).to_vector<double>(), t.to_vector<double>()) << name;
  }
}

void expect_same(const Checkpoint& a, const Checkpoint& b) {
  expect_same_tensors(a.model, b.model);
  EXPECT_EQ(a.config, b.config);
  EXPECT_EQ(a.optimizer.type, b.optimizer.type);
  expect_same_tensors(a.optimizer.tensors, b.optimizer.tensors);
  EXPECT_EQ(a.optimizer.scalars, b.optimizer.scalars);  // exact: 3e-4 / 7 survives as text
  EXPECT_EQ(a.trainer.step, b.trainer.step);
  EXPECT_EQ(a.trainer.lr, b.trainer.lr);
  EXPECT_EQ(a.trainer.rng_seed, b.trainer.rng_seed);
  EXPECT_EQ(a.trainer.rng_offset, b.trainer.rng_offset);
  EXPECT_EQ(a.trainer.data, b.trainer.data);
  EXPECT_EQ(a.trainer.tokenizer, b.trainer.tokenizer);
  EXPECT_EQ(a.trainer.extra, b.trainer.extra);
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Checkpoint, RoundTripsEverything) {
  linea::testing::TempDir root;
  EXPECT_FALSE(latest_checkpoint(root.path()).has_value());
  const Checkpoint saved = make_checkpoint(1000);
  const std::string dir = save_checkpoint(root.path(), saved);
  EXPECT_EQ(dir, root / "step-00001000");
  EXPECT_EQ(latest_checkpoint(root.path()), dir);
  EXPECT_EQ(entries(dir), (std::vector<std::string>{"config.json", "manifest.json", "model.safetensors",
                                                    "optimizer.safetensors", "trainer.json"}));
  EXPECT_EQ(entries(root.path()), (std::vector<std::string>{"LATEST", "step-00001000"}));
  expect_same(load_checkpoint(dir), saved);
  // The weights are a plain safetensors file, for any reader.
  EXPECT_EQ(load_safetensors(dir + "/model.safetensors").metadata,
            (Metadata{{"format", "linea"}, {"format_version", "1"}}));
}

// The whole path an actual run takes: model state and optimizer state through the files.
TEST(Checkpoint, ResumedOptimizerMatchesAnUninterruptedOne) {
  linea::testing::TempDir root;
  auto make_params = [] {
    Generator gen(5);
    std::vector<NamedParameter> params;
    for (const char* name : {"a", "b"}) {
      Tensor t = randn({4, 3}, kFloat32, &gen);
      t.requires_grad_(true);
      params.push_back({name, t, true});
    }
    return params;
  };
  auto run = [](std::vector<NamedParameter>& params, AdamW& opt, int from, int to) {
    for (int step = from; step < to; ++step) {
      Generator gen(100 + step);
      for (NamedParameter& p : params) p.tensor.set_grad(randn(p.tensor.shape(), kFloat32, &gen));
      opt.step();
    }
  };
  auto straight = make_params();
  AdamW uninterrupted(straight, {.weight_decay = 0.1});
  run(straight, uninterrupted, 0, 7);

  auto first = make_params();
  AdamW opt(first, {.weight_decay = 0.1});
  run(first, opt, 0, 3);
  Checkpoint c;
  for (const NamedParameter& p : first) c.model[p.name] = p.tensor;
  c.optimizer = opt.state();
  c.trainer.step = 3;
  save_checkpoint(root.path(), c);

  const Checkpoint loaded = load_checkpoint(*latest_checkpoint(root.path()));
  auto resumed = make_params();  // different values until loaded
  NoGradGuard no_grad;
  for (NamedParameter& p : resumed) copy_(p.tensor, loaded.model.at(p.name));
  AdamW after(resumed, {.weight_decay = 0.1});
  after.load_state(loaded.optimizer);
  run(resumed, after, 3, 7);
  for (size_t i = 0; i < straight.size(); ++i)
    EXPECT_EQ(resumed[i].tensor.to_vector<float>(), straight[i].tensor.to_vector<float>());
}

// What a checkpoint of an older version holds: the block's mixer and its norm under their old
// names (blocks.<i>.attn, blocks.<i>.attn_norm), in the weights and in the optimizer's entries.
std::string old_name(std::string key) {
  for (const auto& [now, before] : {std::pair{".mixer_norm.", ".attn_norm."}, std::pair{".mixer.", ".attn."}}) {
    const size_t at = key.find(now);
    if (at != std::string::npos) key.replace(at, std::string(now).size(), before);
  }
  return key;
}

template <class Map>
Map with_old_names(const Map& entries) {
  Map out;
  for (const auto& [key, value] : entries) out.emplace(old_name(key), value);
  return out;
}

TEST(Checkpoint, LoadsTheParameterNamesOfOlderVersions) {
  linea::testing::TempDir root;
  nn::ModelConfig config;
  config.vocab_size = 11;
  config.d_model = 8;
  config.heads = 2;
  config.pattern = "SR";
  Generator gen(3);
  nn::LanguageModel model(config, gen);
  AdamW opt(model.named_parameters());
  for (NamedParameter& p : model.named_parameters()) p.tensor.set_grad(ones_like(p.tensor));
  opt.step();

  Checkpoint c;
  c.model = with_old_names(model.state_dict());
  c.optimizer = opt.state();
  c.optimizer.tensors = with_old_names(c.optimizer.tensors);
  c.optimizer.scalars = with_old_names(c.optimizer.scalars);
  ASSERT_TRUE(c.model.count("blocks.0.attn.q_proj.weight"));
  ASSERT_TRUE(c.model.count("blocks.1.attn_norm.weight"));
  ASSERT_TRUE(c.optimizer.tensors.count("exp_avg.blocks.0.attn.q_proj.weight"));
  ASSERT_TRUE(c.optimizer.scalars.count("step.blocks.1.attn_norm.weight"));
  c.trainer.step = 1;
  const Checkpoint loaded = load_checkpoint(save_checkpoint(root.path(), c));

  Generator other(4);
  nn::LanguageModel fresh(config, other);
  fresh.load_state_dict(loaded.model);  // strict: every name must match
  AdamW fresh_opt(fresh.named_parameters());
  fresh_opt.load_state(loaded.optimizer);
  expect_same_tensors(fresh.state_dict(), model.state_dict());
  expect_same_tensors(fresh_opt.state().tensors, opt.state().tensors);
  EXPECT_EQ(fresh_opt.state().scalars, opt.state().scalars);
}

TEST(Checkpoint, RefusesAParameterUnderItsOldAndItsCurrentName) {
  linea::testing::TempDir root;
  Checkpoint c = make_checkpoint(1);
  c.model["blocks.0.attn_norm.weight"] = ones({3});
  c.model["blocks.0.mixer_norm.weight"] = ones({3});
  const std::string dir = save_checkpoint(root.path(), c);
  EXPECT_LINEA_ERROR(load_checkpoint(dir), "model.safetensors", "blocks.0.mixer_norm.weight", "old name");
}

TEST(Checkpoint, KeepsTheLastFewAndPointsAtTheNewest) {
  linea::testing::TempDir root;
  for (int64_t step : {100, 200, 300, 400}) save_checkpoint(root.path(), make_checkpoint(step), {.keep_last = 2});
  EXPECT_EQ(entries(root.path()), (std::vector<std::string>{"LATEST", "step-00000300", "step-00000400"}));
  EXPECT_EQ(load_checkpoint(*latest_checkpoint(root.path())).trainer.step, 400);
  save_checkpoint(root.path(), make_checkpoint(500), {.keep_last = 0});
  EXPECT_EQ(entries(root.path()).size(), 4u);
}

// Saving a step that already has a checkpoint never touches the one LATEST names.
TEST(Checkpoint, ResavingAStepWritesBesideIt) {
  linea::testing::TempDir root;
  save_checkpoint(root.path(), make_checkpoint(100));
  Checkpoint again = make_checkpoint(100);
  again.trainer.extra["second"] = true;
  const std::string dir = save_checkpoint(root.path(), again);
  EXPECT_EQ(dir, root / "step-00000100-1");
  EXPECT_EQ(latest_checkpoint(root.path()), dir);
  EXPECT_TRUE(load_checkpoint(dir).trainer.extra.contains("second"));
}

// After resuming from an earlier checkpoint, the abandoned run's later ones are not deleted.
TEST(Checkpoint, PruningLeavesLaterCheckpointsAlone) {
  linea::testing::TempDir root;
  for (int64_t step : {100, 200, 300}) save_checkpoint(root.path(), make_checkpoint(step), {.keep_last = 0});
  save_checkpoint(root.path(), make_checkpoint(150), {.keep_last = 1});
  EXPECT_EQ(entries(root.path()), (std::vector<std::string>{"LATEST", "step-00000150", "step-00000200", "step-00000300"}));
  EXPECT_EQ(load_checkpoint(*latest_checkpoint(root.path())).trainer.step, 150);
}

class DamagedCheckpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(DamagedCheckpoint, FlippedByteIsRefusedNamingTheFile) {
  linea::testing::TempDir root;
  const std::string dir = save_checkpoint(root.path(), make_checkpoint(10));
  const std::string path = dir + "/" + GetParam();
  const uintmax_t size = fs::file_size(path);
  for (uintmax_t at : {uintmax_t{0}, size / 2, size - 2}) {
    std::string bytes = read_file(path, "test file");
    bytes[at] ^= 0x10;
    { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; }
    EXPECT_LINEA_ERROR(load_checkpoint(dir), dir.c_str());
    if (GetParam() != "manifest.json") EXPECT_LINEA_ERROR(load_checkpoint(dir), path.c_str(), "checksum");
    bytes[at] ^= 0x10;
    { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; }
    EXPECT_NO_THROW(load_checkpoint(dir));
  }
}

TEST_P(DamagedCheckpoint, TruncatedFileIsRefusedNamingTheFile) {
  linea::testing::TempDir root;
  const std::string dir = save_checkpoint(root.path(), make_checkpoint(10));
  const std::string path = dir + "/" + GetParam();
  fs::resize_file(path, fs::file_size(path) - 3);
  if (GetParam() == "manifest.json") EXPECT_LINEA_ERROR(load_checkpoint(dir), path.c_str());
  else EXPECT_LINEA_ERROR(load_checkpoint(dir), path.c_str(), "truncated");
  fs::resize_file(path, 0);
  EXPECT_LINEA_ERROR(load_checkpoint(dir), path.c_str());
  fs::remove(path);
  EXPECT_LINEA_ERROR(load_checkpoint(dir), path.c_str());
}

INSTANTIATE_TEST_SUITE_P(EachFile, DamagedCheckpoint,
                         ::testing::Values("model.safetensors", "config.json", "optimizer.safetensors", "trainer.json",
                                           "manifest.json"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

// A save that fails part way (here: a tensor it cannot write) leaves no trace and the previous
// checkpoint current.
TEST(Checkpoint, FailedSaveLeavesThePreviousOneCurrent) {
  linea::testing::TempDir root;
  const Checkpoint first = make_checkpoint(100);
  const std::string dir = save_checkpoint(root.path(), first);
  Checkpoint broken = make_checkpoint(200);
  broken.optimizer.tensors["exp_avg.x"] = Tensor();  // fails after model.safetensors is written
  EXPECT_THROW(save_checkpoint(root.path(), broken), Error);
  EXPECT_EQ(entries(root.path()), (std::vector<std::string>{"LATEST", "step-00000100"}));
  EXPECT_EQ(latest_checkpoint(root.path()), dir);
  expect_same(load_checkpoint(dir), first);
}

// What a crash leaves at each point of a save, made by hand: the previous checkpoint stays the
// one loaded, and the next save cleans up and succeeds.
TEST(Checkpoint, CrashAtAnyPointLeavesThePreviousOneLoadable) {
  linea::testing::TempDir root;
  const Checkpoint first = make_checkpoint(100);
  const std::string dir = save_checkpoint(root.path(), first);
  // Crash while writing files: a temporary directory with a partial file and no manifest.
  fs::create_directory(root / "step-00000200.tmp");
  { std::ofstream(root / "step-00000200.tmp/model.safetensors") << "partial"; }
  // Crash after the rename, before LATEST changed: a complete but uncommitted checkpoint.
  fs::copy(dir, root / "step-00000300");
  // Crash while replacing LATEST: its temporary file, half written.
  { std::ofstream(root / "LATEST.tmp4242") << "step-0000"; }

  EXPECT_EQ(latest_checkpoint(root.path()), dir);
  expect_same(load_checkpoint(*latest_checkpoint(root.path())), first);

  const std::string next = save_checkpoint(root.path(), make_checkpoint(200), {.keep_last = 0});
  EXPECT_EQ(next, root / "step-00000200");
  EXPECT_EQ(entries(root.path()), (std::vector<std::string>{"LATEST", "step-00000100", "step-00000200", "step-00000300"}));
  EXPECT_EQ(load_checkpoint(*latest_checkpoint(root.path())).trainer.step, 200);
}

TEST(Checkpoint, BadPointerIsAnError) {
  linea::testing::TempDir root;
  write_file_atomically(root / "LATEST", "../../etc\n");
  EXPECT_LINEA_ERROR(latest_checkpoint(root.path()), "LATEST", "corrupt");
  write_file_atomically(root / "LATEST", "step-00000007\n");
  EXPECT_LINEA_ERROR(latest_checkpoint(root.path()), "step-00000007", "does not exist");
  EXPECT_FALSE(latest_checkpoint(root / "nowhere").has_value());
}

TEST(Checkpoint, RefusesAnotherFormatVersion) {
  linea::testing::TempDir root;
  const std::string dir = save_checkpoint(root.path(), make_checkpoint(1));
  json::Value manifest = json::parse(read_file(dir + "/manifest.json", "manifest"));
  manifest["format_version"] = 2;
  write_file_atomically(dir + "/manifest.json", manifest.dump());
  EXPECT_LINEA_ERROR(load_checkpoint(dir), "format version '2'", "reads version 1");
}

}  // namespace
}  // namespace linea::train
