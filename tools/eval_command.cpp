// `linea eval`: a checkpoint's loss and perplexity on a split. The last line is
// `loss=<x> ppl=<y>`, which scripts rely on.
#include <cstdio>

#include "tools/commands.h"
#include "tools/flags.h"
#include "train/corpus.h"
#include "train/evaluate.h"
#include "train/saved_model.h"
#include "train/train_options.h"

namespace linea::cli {

namespace {

int run(const std::string& program, std::span<const std::string> args) {
  std::string checkpoint, data, split = "test", device = "cpu", tokenizer_file, cache_dir;
  int64_t batch = 16, seq = 0;
  bool use_default_data = false;
  Flags flags(program, "Evaluates a checkpoint: mean next-token loss and perplexity over a whole split.");
  flags.add("checkpoint", &checkpoint, "run directory (its latest checkpoint) or one checkpoint directory");
  flags.add("data", &data, "text file or train/valid/test directory; default: the data the run trained on");
  flags.add("default-data", &use_default_data, "evaluate on the fortunes corpus whatever the run used");
  flags.add_choice("split", &split, {"train", "valid", "test"}, "which split");
  flags.add("batch", &batch, "sequences per batch");
  flags.add("seq", &seq, "tokens per sequence; 0: the run's");
  flags.add("device", &device, "cpu, cuda or cuda:N");
  flags.add("tokenizer-file", &tokenizer_file, "must be the checkpoint's own tokenizer (checked)");
  flags.add("cache-dir", &cache_dir, "cache of encoded corpora; empty: default; 'none': no cache");
  if (!flags.parse(args)) return 0;
  if (checkpoint.empty()) flags.fail("--checkpoint is required");
  if (batch <= 0) flags.fail("--batch must be positive");

  const Device dev = Device::parse(device);
  const train::SavedModel saved = train::load_saved_model(checkpoint, dev);
  train::TrainOptions run_options;
  if (const json::Value* options = json::find(saved.checkpoint.trainer.extra, "options")) run_options.update_from_json(*options);
  if (!tokenizer_file.empty()) {
    const auto given = train::load_tokenizer(tokenizer_file);
    LINEA_CHECK(given->fingerprint() == saved.tokenizer->fingerprint(), "eval", "vocabulary mismatch: the tokenizer '",
                tokenizer_file, "' (", given->name(), ", ", given->vocab_size(), " ids) is not the one the checkpoint ",
                saved.dir, " was trained with (", saved.tokenizer->name(), ", ", saved.tokenizer->vocab_size(), " ids)");
  }
  train::CorpusOptions c;
  c.data = use_default_data ? "" : (flags.was_set("data") ? data : run_options.data);
  c.given_tokenizer = saved.tokenizer;
  c.cache_dir = cache_dir == "none" ? "" : (cache_dir.empty() ? train::default_cache_dir() : cache_dir);
  c.log = [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); };
  const train::Corpus corpus = train::load_corpus(c);
  const std::vector<int64_t>& tokens = split == "train" ? corpus.train : (split == "valid" ? corpus.valid : corpus.test);
  const train::EvalResult r =
      train::evaluate(*saved.model, tokens, batch, seq > 0 ? seq : run_options.seq, dev);
  std::printf("checkpoint %s, step %lld, %s split of %s: %lld tokens\n", saved.dir.c_str(),
              static_cast<long long>(saved.checkpoint.trainer.step), split.c_str(), corpus.name.c_str(),
              static_cast<long long>(r.tokens));
  std::printf("loss=%.6f ppl=%.4f\n", r.loss, r.ppl);
  return 0;
}

}  // namespace

Command eval_command() { return {"eval", "loss and perplexity of a checkpoint on a split", run}; }

}  // namespace linea::cli
