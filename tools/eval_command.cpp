// `linea eval`: a checkpoint's loss and perplexity on a split. The last line is
// `loss=<x> ppl=<y>`, which scripts rely on. With --choices FILE.jsonl it scores multiple-choice
// items instead (train/choices.h); the last line is then `items=<n> acc=<x> acc_norm=<y>`.
#include <cstdio>

#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/train_flags.h"
#include "nn/precision.h"
#include "nn/json.h"
#include "train/choices.h"
#include "train/corpus.h"
#include "train/file_io.h"
#include "train/evaluate.h"
#include "train/saved_model.h"
#include "train/train_options.h"

namespace linea::cli {

namespace {

// --choices and the flags that only mean something with it.
struct ChoiceOptions {
  std::string path;  // JSON-lines items; empty: evaluate a split instead
  int64_t shots = 0;
  uint64_t seed = 0;
  std::string out;
};

void add_choice_flags(Flags& flags, ChoiceOptions& choice) {
  flags.add("choices", &choice.path,
            "JSON-lines multiple-choice items ({\"context\", \"endings\", \"label\"} per line) to score instead "
            "of a split: accuracy by each ending's summed log-likelihood and per byte (docs/paper.md)");
  flags.add("shots", &choice.shots, "with --choices: solved items put before each context (k-shot; 0: zero-shot)");
  flags.add("seed", &choice.seed, "with --choices: which items the shots are");
  flags.add("out", &choice.out, "with --choices: write each item's scores here (JSON lines)");
}

// After parsing: a negative --shots, or --shots, --seed or --out given without --choices, is a
// usage error rather than silently ignored.
void check_choice_flags(const Flags& flags, const ChoiceOptions& choice) {
  if (choice.shots < 0) flags.fail("--shots must be >= 0");
  if (choice.path.empty() && (flags.was_set("shots") || flags.was_set("out") || flags.was_set("seed")))
    flags.fail("--shots, --seed and --out go with --choices");
}

// --choices: every item scored, the accuracies printed, the per-item scores to --out if given.
int run_choices(const train::SavedModel& saved, const ChoiceOptions& choice, Device device) {
  const std::vector<train::ChoiceItem> items = train::read_choice_items(choice.path);
  const train::ChoiceResult r =
      train::score_choices(*saved.model, *saved.tokenizer, items, choice.shots, choice.seed, device, choice.path);
  if (!choice.out.empty()) {
    std::string lines;
    for (size_t i = 0; i < items.size(); ++i)
      lines += json::dump(json::Value{{"item", i + 1}, {"label", items[i].label}, {"log_likelihoods", r.items[i].log_likelihoods},
                                      {"predicted", r.items[i].predicted}, {"predicted_norm", r.items[i].predicted_norm}}) +
               "\n";
    train::write_file_atomically(choice.out, lines);
  }
  std::printf("checkpoint %s, step %lld, %s: %zu items, %lld-shot\n", saved.dir.c_str(),
              static_cast<long long>(saved.checkpoint.trainer.step), choice.path.c_str(), items.size(),
              static_cast<long long>(choice.shots));
  std::printf("items=%zu acc=%.4f acc_norm=%.4f\n", items.size(), r.acc, r.acc_norm);
  return 0;
}

int run(const std::string& program, std::span<const std::string> args) {
  std::string checkpoint, data, split = "test", device = "cpu", tokenizer_file, cache_dir;
  std::string precision = "fp32";
  int64_t batch = 16, seq = 0;
  bool use_default_data = false;
  ChoiceOptions choice;
  Flags flags(program, "Evaluates a checkpoint: mean next-token loss and perplexity over a whole split.");
  flags.add("checkpoint", &checkpoint, "run directory (its latest checkpoint) or one checkpoint directory");
  flags.add("data", &data, "text file or train/valid/test directory; default: the data the run trained on");
  flags.add("default-data", &use_default_data, "evaluate on the fortunes corpus whatever the run used");
  flags.add_choice("split", &split, {"train", "valid", "test"}, "which split");
  flags.add("batch", &batch, "sequences per batch");
  flags.add("seq", &seq, "tokens per sequence; 0: the run's");
  add_device_flags(flags, device, precision);
  flags.add("tokenizer-file", &tokenizer_file, "must be the checkpoint's own tokenizer (checked)");
  flags.add("cache-dir", &cache_dir, "cache of encoded corpora; empty: default; 'none': no cache");
  add_choice_flags(flags, choice);
  if (!flags.parse(args)) return 0;
  if (checkpoint.empty()) flags.fail("--checkpoint is required");
  if (batch <= 0) flags.fail("--batch must be positive");
  check_choice_flags(flags, choice);

  const Device dev = Device::parse(device);
  const nn::PrecisionScope precision_scope(nn::parse_precision(precision, "eval"));
  const train::SavedModel saved = train::load_saved_model(checkpoint, dev);
  if (!choice.path.empty()) return run_choices(saved, choice, dev);
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
