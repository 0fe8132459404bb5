#include "tools/paper/lm_runs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "tensor/error.h"
#include "tools/paper/report.h"
#include "train/corpus.h"
#include "train/corpus_text.h"
#include "train/file_io.h"
#include "train/linearize.h"
#include "train/trainer.h"

namespace linea::cli::paper {

namespace {

// Every table run's messages go here: the report is what the user reads, and a progress bar per
// row would bury it. One line per run goes to stdout instead (announce below).
class QuietOutput {
 public:
  QuietOutput() : file_(std::fopen("/dev/null", "w")) {
    LINEA_CHECK(file_, "paper.runs", "could not open /dev/null");
  }
  ~QuietOutput() { std::fclose(file_); }
  QuietOutput(const QuietOutput&) = delete;
  QuietOutput& operator=(const QuietOutput&) = delete;
  std::FILE* get() const { return file_; }

 private:
  std::FILE* file_;
};

std::string run_dir(const PaperRun& run, const std::string& id, uint64_t seed) {
  const std::string dir = (std::filesystem::path(run.out) / "runs" / (id + "-seed" + std::to_string(seed))).string();
  std::filesystem::remove_all(dir);  // the experiment's own scratch: a rerun replaces it, never resumes it
  return dir;
}

// The budget's optimization settings on o (the model's shape is set by the caller, or inherited
// from the source model when linearizing).
void apply_budget(const LmBudget& b, uint64_t seed, const std::string& out, train::TrainOptions& o) {
  o.steps = b.steps;
  o.batch = b.batch;
  o.seq = b.seq;
  o.warmup = b.warmup;
  o.lr = b.lr;
  o.min_lr = b.lr / 10;
  o.eval_every = o.save_every = b.steps;  // one periodic evaluation and checkpoint: at the end
  o.eval_batches = 4;
  o.log_every = std::max<int64_t>(1, b.steps / 10);
  o.sample_tokens = 0;
  o.seed = seed;
  o.out = out;
}

// The trainer stops a run whose loss or gradient norm stops being finite with an Error saying
// the value "became" NaN or Inf (train/trainer.cpp). Only that one is a result (a diverged row);
// anything else (a bad option, no corpus) is the experiment's failure and propagates.
bool is_divergence(const Error& e) { return std::string(e.what()).find(" became ") != std::string::npos; }

LmRun finished(const train::TrainResult& r, uint64_t seed, int64_t tokens) {
  LmRun run;
  run.seed = seed;
  run.test_loss = r.test_loss;
  run.test_ppl = r.test_ppl;
  run.valid_ppl = r.valid_ppl;
  run.parameters = r.parameters;
  run.steps = r.steps;
  run.tokens = tokens;
  run.seconds = r.seconds;
  run.checkpoint = r.checkpoint;
  return run;
}

LmRun diverged(const Error& e, uint64_t seed) {
  LmRun run;
  run.seed = seed;
  run.diverged = true;
  run.error = e.what();
  run.test_loss = run.test_ppl = run.valid_ppl = std::numeric_limits<double>::infinity();
  return run;
}

void announce(const std::string& id, const LmRun& r) {
  if (r.diverged)
    std::printf("  %s seed %llu: diverged (%s)\n", id.c_str(), static_cast<unsigned long long>(r.seed), r.error.c_str());
  else
    std::printf("  %s seed %llu: test ppl %.4g, %lld parameters, %.1f s\n", id.c_str(),
                static_cast<unsigned long long>(r.seed), r.test_ppl, static_cast<long long>(r.parameters), r.seconds);
  std::fflush(stdout);
}

// The first `bytes` of text, cut back to the end of a line (so UTF-8 stays whole).
std::string leading_lines(const std::string& text, size_t bytes) {
  if (text.size() <= bytes) return text;
  const size_t end = text.rfind('\n', bytes);
  return text.substr(0, end == std::string::npos ? bytes : end + 1);
}

}  // namespace

std::string table_data(const PaperRun& run) {
  if (!run.data.empty() || run.scale != Scale::Tiny) return run.data;
  const std::filesystem::path dir = std::filesystem::path(run.out) / "runs" / "tiny-corpus";
  if (!std::filesystem::exists(dir / "test.txt")) {
    const train::CorpusText text = train::read_fortunes(train::kFortunesDir, /*require_utf8=*/true);
    std::filesystem::create_directories(dir);
    train::write_file_atomically((dir / "train.txt").string(), leading_lines(text.train, 200000));
    train::write_file_atomically((dir / "valid.txt").string(), leading_lines(text.valid, 8192));
    train::write_file_atomically((dir / "test.txt").string(), leading_lines(text.test, 8192));
  }
  return dir.string();
}

std::string data_description(const PaperRun& run) {
  if (!run.data.empty()) return "`" + run.data + "`";
  return run.scale == Scale::Tiny ? "the default corpus (its first 200 kB to train, 8 kB each to validate and test)"
                                  : "the default corpus";
}

std::string runs_description(const PaperRun& run) {
  const std::string seeds = run.seeds == 1 ? "seed " + std::to_string(run.seed)
                                           : std::to_string(run.seeds) + " seeds from " + std::to_string(run.seed);
  return lm_budget(run).describe() + "; " + seeds + "; on " + data_description(run);
}

std::string LmBudget::describe() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "d_model %lld, %lld layers, %lld heads, %s tokens; %lld steps of %lld x %lld tokens (%lld tokens), "
                "warmup %lld, AdamW lr %g cosine to %g",
                static_cast<long long>(d_model), static_cast<long long>(layers), static_cast<long long>(heads),
                tokenizer.c_str(), static_cast<long long>(steps), static_cast<long long>(batch),
                static_cast<long long>(seq), static_cast<long long>(tokens()), static_cast<long long>(warmup), lr,
                lr / 10);
  return buf;
}

json::Value LmBudget::to_json() const {
  return {{"tokenizer", tokenizer}, {"d_model", d_model}, {"layers", layers}, {"heads", heads},
          {"steps", steps},         {"batch", batch},     {"seq", seq},       {"warmup", warmup},
          {"lr", lr},               {"tokens", tokens()}};
}

LmBudget lm_budget(const PaperRun& run) {
  LmBudget b;
  // tiny: a smoke test of the whole path, seconds per row on 2 cores. small: WikiText-2 word level
  // (2.1M training words: 1000 steps of 32 x 256 tokens is about 4 epochs), head dim 64 as the
  // paper's, one GPU.
  b.tokenizer = run.pick<std::string>("char", "word");
  b.d_model = run.pick<int64_t>(32, 256);
  b.layers = run.pick<int64_t>(2, 6);
  b.heads = run.pick<int64_t>(2, 4);
  b.steps = run.pick<int64_t>(24, 1000);
  b.batch = run.pick<int64_t>(8, 32);
  b.seq = run.pick<int64_t>(32, 256);
  b.warmup = run.pick<int64_t>(4, 100);
  b.lr = run.pick(3e-3, 2e-3);
  return b;
}

std::string RowModel::pattern(int64_t layers) const {
  LINEA_CHECK(!unit.empty(), "paper.runs", "a row needs a layer pattern");
  std::string p;
  while (static_cast<int64_t>(p.size()) < layers) p += unit[p.size() % unit.size()];
  return p;
}

std::string RowModel::describe(int64_t layers) const {
  const std::string options = json::dump(layer_options);
  return "`" + pattern(layers) + "`" + (options == "{}" ? "" : " `" + options + "`");
}

std::string RowModel::describe_linearized(int64_t layers) const {
  std::string s = "`";
  s.append(static_cast<size_t>(layers), 'S');
  s += "` -> ";
  s += describe(layers);
  return s;
}

json::Value regla_options(json::Value extra) {
  json::Value r = std::move(extra);
  r["gate_dim"] = "key";
  return r;
}

json::Value LmRun::to_json() const {
  json::Value v = {{"seed", seed}, {"diverged", diverged}};
  if (diverged) {
    v["error"] = error;
    return v;
  }
  v["test_loss"] = test_loss;
  v["test_ppl"] = test_ppl;
  v["valid_ppl"] = valid_ppl;
  v["parameters"] = parameters;
  v["steps"] = steps;
  v["tokens"] = tokens;
  v["seconds"] = seconds;
  return v;
}

double RowResult::ppl() const {
  if (runs.empty()) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (const LmRun& r : runs) {
    if (r.diverged) return std::numeric_limits<double>::infinity();
    sum += r.test_ppl;
  }
  return sum / static_cast<double>(runs.size());
}

std::string RowResult::ppl_text() const {
  const double p = ppl();
  if (std::isinf(p)) return "diverged";
  std::string s = format_number(p, 4);
  if (runs.size() > 1) {
    auto [lo, hi] = std::minmax_element(runs.begin(), runs.end(),
                                        [](const LmRun& a, const LmRun& b) { return a.test_ppl < b.test_ppl; });
    s += " (" + format_number(lo->test_ppl, 4) + "-" + format_number(hi->test_ppl, 4) + ")";
  }
  return s;
}

json::Value RowResult::to_json() const {
  json::Value seeds = json::Value::array();
  for (const LmRun& r : runs) seeds.push_back(r.to_json());
  const double p = ppl();
  return {{"test_ppl", std::isfinite(p) ? json::Value(p) : json::Value()}, {"parameters", parameters()}, {"seeds", seeds}};
}

RowResult train_from_scratch(const PaperRun& run, const std::string& id, const RowModel& row) {
  const LmBudget b = lm_budget(run);
  const QuietOutput quiet;
  RowResult result;
  for (int64_t k = 0; k < run.seeds; ++k) {
    const uint64_t seed = run.seed + static_cast<uint64_t>(k);
    train::TrainOptions o;
    o.data = table_data(run);
    o.tokenizer = b.tokenizer;
    o.cache_dir = "none";
    o.device = run.device;
    o.model = row.pattern(b.layers);
    o.d_model = b.d_model;
    o.heads = b.heads;
    o.layer_options = json::dump(row.layer_options);
    apply_budget(b, seed, run_dir(run, id, seed), o);
    LmRun r;
    try {
      r = finished(train::train_model(o, quiet.get()), seed, b.tokens());
    } catch (const Error& e) {
      if (!is_divergence(e)) throw;
      r = diverged(e, seed);
    }
    announce(id, r);
    result.runs.push_back(r);
  }
  return result;
}

RowResult linearize_from(const PaperRun& run, const std::string& id, const RowResult& sources, const RowModel& row,
                         int64_t transfer_steps) {
  const LmBudget b = lm_budget(run);
  const QuietOutput quiet;
  RowResult result;
  for (const LmRun& source : sources.runs) {
    LmRun r;
    if (source.diverged) {
      r = source;  // nothing to linearize: the row inherits the divergence
      r.error = "the softmax model it starts from diverged: " + source.error;
    } else {
      train::LinearizeOptions options;
      options.checkpoint = source.checkpoint;
      options.transfer_steps = transfer_steps;
      const train::SourceRun trained = train::load_source_run(options.checkpoint);
      options.train = train::linearized_train_options(trained, row.pattern(b.layers), run_dir(run, id, source.seed));
      json::Value layers = json::parse(trained.options.layer_options);
      for (const auto& [letter, o] : row.layer_options.items()) layers[letter] = o;
      options.train.layer_options = json::dump(layers);
      options.train.device = run.device;
      apply_budget(b, source.seed, options.train.out, options.train);
      try {
        const train::LinearizeResult l = train::linearize(options, /*resume=*/false, quiet.get());
        // The fine-tune's tokens; the softmax model's own are the source row's.
        r = finished(l.train, source.seed, b.tokens());
      } catch (const Error& e) {
        if (!is_divergence(e)) throw;
        r = diverged(e, source.seed);
      }
    }
    announce(id, r);
    result.runs.push_back(r);
  }
  return result;
}

bool row_selected(const PaperRun& run, const std::string& id) {
  return run.rows.empty() || std::find(run.rows.begin(), run.rows.end(), id) != run.rows.end();
}

}  // namespace linea::cli::paper
