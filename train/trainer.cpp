#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>

#include "nn/precision.h"
#include "train/adamw.h"
#include "train/batcher.h"
#include "train/checkpoint.h"
#include "train/corpus.h"
#include "train/data_parallel.h"
#include "train/evaluate.h"
#include "train/generate.h"
#include "train/grad_utils.h"
#include "train/gradient_sync.h"
#include "train/progress.h"
#include "train/prompt.h"
#include "train/run_checkpoint.h"
#include "train/run_log.h"
#include "train/saved_model.h"
#include "train/schedule.h"
#include "train/sgd.h"
#include "train/train_step.h"
#include "train/trainable.h"

namespace linea::train {

uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::unique_ptr<Optimizer> make_optimizer(const TrainOptions& o, std::vector<nn::NamedParameter> params) {
  if (o.optimizer == "sgd")
    return std::make_unique<SGD>(std::move(params),
                                 SGDOptions{.lr = o.lr, .momentum = o.momentum, .weight_decay = o.weight_decay});
  return std::make_unique<AdamW>(std::move(params), AdamWOptions{.lr = o.lr, .beta1 = o.beta1, .beta2 = o.beta2,
                                                                 .eps = o.eps, .weight_decay = o.weight_decay});
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// With LoRA only the adapters train; otherwise everything.
std::vector<nn::NamedParameter> trainable_parameters(const TrainOptions& o, const nn::Module& model) {
  if (o.lora_rank > 0) return freeze_all_but(model, nn::is_lora_parameter, "train");
  return model.named_parameters();
}

// The final checkpoint of a LoRA run with merge_lora: the adapters folded into the weights, and
// what a plain run of that model would hold (options without LoRA, a fresh optimizer state).
Checkpoint merged_lora_checkpoint(Checkpoint ck, const TrainOptions& o, const nn::ModelConfig& config) {
  nn::ModelConfig plain = config;
  plain.lora = {};
  TrainOptions plain_options = o;
  plain_options.lora_rank = 0;
  ck.model = nn::merge_lora(ck.model, config.lora);
  ck.config = plain.to_json();
  ck.trainer.extra["options"] = plain_options.to_json();
  Generator gen(0);
  nn::LanguageModel plain_model(plain, gen);  // only its parameter names and shapes are used
  ck.optimizer = make_optimizer(plain_options, plain_model.named_parameters())->state();
  return ck;
}

// What a resumed run reads back, when there is a checkpoint to resume from.
struct ResumePoint {
  Checkpoint checkpoint;
  std::string dir;
};

std::optional<ResumePoint> find_resume_point(const TrainOptions& o) {
  const std::optional<std::string> latest = latest_checkpoint(o.out);
  if (!o.resume) {
    // A fresh run would overwrite the log and, step by step, the checkpoints of the run already
    // there: refuse rather than lose it.
    LINEA_CHECK(!latest.has_value(), "train", "'", o.out, "' already holds a run (latest checkpoint ", *latest,
                "); pass --resume to continue it, or choose another --out");
    return std::nullopt;
  }
  LINEA_CHECK(latest.has_value(), "train", "--resume: '", o.out, "' holds no checkpoint to resume from");
  return ResumePoint{load_checkpoint(*latest), *latest};
}

Corpus load_training_corpus(const TrainOptions& o, const std::optional<ResumePoint>& resume, const RunStart& start,
                            Progress& progress) {
  CorpusOptions c = o.corpus_options();
  c.log = [&](const std::string& m) { progress.message(m); };
  if (resume) c.given_tokenizer = tokenizer_from_record(resume->checkpoint.trainer.tokenizer, resume->dir);
  else if (start.tokenizer) c.given_tokenizer = start.tokenizer;
  else if (!o.tokenizer_file.empty()) c.given_tokenizer = load_tokenizer(o.tokenizer_file);
  Corpus corpus = load_corpus(c);
  LINEA_CHECK(static_cast<int64_t>(corpus.train.size()) > o.seq, "train", "the training split of '", corpus.name,
              "' has ", corpus.train.size(), " tokens, fewer than one window of --seq ", o.seq, " + 1");
  LINEA_CHECK(corpus.valid.size() >= 2 && corpus.test.size() >= 2, "train", "the valid or test split of '",
              corpus.name, "' is empty");
  return corpus;
}

int64_t trainable_count(const Optimizer& optimizer) {
  int64_t n = 0;
  for (const nn::NamedParameter& p : optimizer.parameters()) n += p.tensor.numel();
  return n;
}

json::Value eval_record(int64_t step, const char* split, const EvalResult& r) {
  json::Value v = json::Value::object();
  v["kind"] = "eval";
  v["step"] = step;
  v["split"] = split;
  v["loss"] = r.loss;
  v["ppl"] = r.ppl;
  v["tokens"] = r.tokens;
  return v;
}

std::string describe_eval(const char* split, const EvalResult& r) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s loss %.4f ppl %.3f (%lld tokens)", split, r.loss, r.ppl,
                static_cast<long long>(r.tokens));
  return buf;
}

}  // namespace

TrainResult train_model(const TrainOptions& options, std::FILE* out, const StopRequested& stop_requested,
                        const RunStart& run_start, dist::Communicator* comm) {
  const auto start = Clock::now();
  const auto stop = [&] { return stop_requested && stop_requested(); };
  TrainOptions o = options;
  o.validate();
  const int world = comm ? comm->size() : 1;
  const bool leader = !comm || comm->rank() == 0;
  const Device device = comm ? comm->device() : Device::parse(o.device);
  const nn::PrecisionScope precision(nn::parse_precision(o.precision, "train"));  // for every forward below
  const std::optional<ResumePoint> resume = find_resume_point(o);
  Progress progress(o.steps, o.log_every, leader ? out : nullptr);

  // Rank 0 reads the corpus first: it may build the token cache, which the others then read
  // instead of building it N times over each other.
  if (comm && !leader) dist::barrier(*comm);
  Corpus corpus = load_training_corpus(o, resume, run_start, progress);
  if (comm && leader) dist::barrier(*comm);
  // The sample's prompt is checked now rather than after training: one the tokenizer cannot
  // encode fails (or, with drop_unknown, loses those pieces) before the first step.
  std::string prompt = o.prompt;
  if (o.sample_tokens > 0) {
    const CheckedPrompt checked = check_prompt(o.prompt, *corpus.tokenizer, o.drop_unknown, {"train", "the run's"});
    if (!checked.dropped.empty()) progress.message("linea train: warning: dropped from the prompt " + checked.dropped);
    prompt = checked.text;
  }
  const nn::ModelConfig config = o.model_config(corpus.tokenizer->vocab_size());
  nn::ModelConfig seeded = config;
  seeded.seed = derive_seed(o.seed, kDropoutStream);
  Generator init_gen(derive_seed(o.seed, kInitStream));
  nn::LanguageModel model(seeded, init_gen);
  const json::Value start_record = !resume && run_start.initialize ? run_start.initialize(model) : json::Value();
  model.to(device);
  std::unique_ptr<Optimizer> optimizer = make_optimizer(o, trainable_parameters(o, model));
  const std::optional<BatcherState> resumed_data =
      resume ? std::optional(batcher_state_from_json(resume->checkpoint.trainer.data, "checkpoint data position"))
             : std::nullopt;
  if (resumed_data && resumed_data->batch_size != o.batch * world) {
    o.batch = per_rank_batch(resumed_data->batch_size, world);
    progress.message("linea train: " + std::to_string(o.batch) + " sequences per rank on " + std::to_string(world) +
                     " ranks keep the checkpoint's global batch of " + std::to_string(resumed_data->batch_size));
  }
  // Every rank draws the global batch and trains on its rows of it (train/data_parallel.h).
  RandomBatcher batcher(corpus.train, o.batch * world, o.seq, derive_seed(o.seed, kBatchStream));
  std::vector<Tensor> trainable;
  for (const nn::NamedParameter& p : optimizer->parameters()) trainable.push_back(p.tensor);
  std::optional<GradientSync> gradient_sync;
  if (comm) gradient_sync.emplace(*comm, trainable);
  const LrSchedule schedule({.peak_lr = o.lr, .min_lr = o.min_lr, .warmup_steps = o.warmup, .total_steps = o.steps,
                             .decay = parse_decay(o.schedule)});

  int64_t step = 0;
  if (resume) {
    const Checkpoint& ck = resume->checkpoint;
    model.load_state_dict(ck.model);
    optimizer->load_state(ck.optimizer);
    batcher.restore(*resumed_data);
    model.dropout_generator().manual_seed(ck.trainer.rng_seed);
    model.dropout_generator().set_offset(ck.trainer.rng_offset);
    step = ck.trainer.step;
    LINEA_CHECK(step <= o.steps, "train", "--resume: the checkpoint is at step ", step, ", past --steps ", o.steps);
  }
  if (leader) std::filesystem::create_directories(o.out);
  // Rank 0 keeps the log; the other ranks' records go nowhere.
  std::optional<RunLog> run_log;
  if (leader) run_log.emplace(o.out + "/log.jsonl", resume ? step : -1);
  const auto log_write = [&](const json::Value& record) {
    if (run_log) run_log->write(record);
  };
  {
    json::Value record = json::Value::object();
    record["kind"] = resume ? "resume" : "config";
    record["step"] = step;
    record["options"] = o.to_json();
    record["model"] = config.to_json();
    record["parameters"] = model.num_parameters();
    record["corpus"] = corpus.name;
    record["tokenizer"] = corpus.tokenizer->name();
    record["trainable_parameters"] = trainable_count(*optimizer);
    if (comm) record["world_size"] = world;
    log_write(record);
    if (!start_record.is_null()) log_write(start_record);
  }
  progress.message("linea train: " + std::to_string(model.num_parameters()) + " parameters, pattern " + config.pattern +
                   ", vocab " + std::to_string(config.vocab_size) + " (" + corpus.tokenizer->name() + "), " +
                   std::to_string(corpus.train.size()) + " training tokens, device " + device.str() +
                   (o.lora_rank > 0 ? ", LoRA rank " + std::to_string(o.lora_rank) + " (" +
                                          std::to_string(trainable_count(*optimizer)) + " trainable)" : "") +
                   (comm ? ", " + std::to_string(world) + (world == 1 ? " rank" : " ranks") + " of " + std::to_string(o.batch) +
                               " sequences" : "") +
                   (resume ? ", resuming from step " + std::to_string(step) : ""));

  // The latest checkpoint and its step: a stop right after a periodic save (or before the first
  // step of a resumed run) has nothing new to write.
  std::string last_checkpoint = resume ? resume->dir : "";
  int64_t saved_step = resume ? step : -1;
  // What every checkpoint keeps in trainer.extra besides the options.
  json::Value extra = resume ? resume->checkpoint.trainer.extra : run_start.extra;
  if (!extra.is_object()) extra = json::Value::object();
  extra["options"] = o.to_json();
  auto save = [&](int64_t at) -> std::string {
    if (!leader) return "";  // the replicas are identical: rank 0 alone writes
    Checkpoint ck = run_checkpoint(model, config, *optimizer, at, batcher, *corpus.tokenizer, extra);
    const bool merge = at == o.steps && o.lora_rank > 0 && o.merge_lora;
    if (merge) {
      ck = merged_lora_checkpoint(std::move(ck), o, config);
      json::Value record = json::Value::object();
      record["kind"] = "lora_merged";
      record["step"] = at;
      log_write(record);
    }
    last_checkpoint = save_checkpoint(o.out, ck);
    saved_step = at;
    return last_checkpoint;
  };

  const int64_t tokens_per_step = o.batch * world * o.seq * o.accum;
  const int64_t first_step = step;
  const auto loop_start = Clock::now();
  // Alone, a stop request is asked before each step; in a data-parallel run the ranks agree on it
  // with each step's numbers, and all stop after the same step.
  bool stop_agreed = false;
  const auto stopping = [&] { return comm ? stop_agreed : stop(); };
  model.train();
  while (step < o.steps && !stopping()) {
    const auto step_start = Clock::now();
    const double lr = schedule(step + 1);
    optimizer->set_lr(lr);
    std::vector<Batch> micro_batches;
    for (int64_t micro = 0; micro < o.accum; ++micro)
      micro_batches.push_back(rows_of_rank(batcher.next(), comm ? comm->rank() : 0, world));
    std::optional<ParallelStep> parallel;
    if (comm) parallel.emplace(ParallelStep{*gradient_sync, stop()});
    const StepResult r = train_step(model, *optimizer, micro_batches, o.clip, device, parallel ? &*parallel : nullptr);
    stop_agreed = r.stop;
    const std::string keep_note = last_checkpoint.empty() ? std::string("No checkpoint had been written yet.")
                                                          : "The last good checkpoint is " + last_checkpoint + ".";
    LINEA_CHECK(r.loss_finite, "train", "the loss became ", r.loss, " at step ", step + 1, "; training stopped. ",
                keep_note, " Try a lower --lr or a smaller --clip.");
    LINEA_CHECK(r.clip.finite, "train", "the gradient norm became ", r.clip.norm, " at step ", step + 1,
                "; training stopped. ", keep_note, " Try a lower --lr.");
    const double loss = r.loss;
    const ClipResult& clip = r.clip;
    ++step;

    const double step_seconds = seconds_since(step_start);
    const double elapsed = seconds_since(loop_start);
    const double tokens_per_s = static_cast<double>(tokens_per_step * (step - first_step)) / std::max(elapsed, 1e-9);
    json::Value record = json::Value::object();
    record["kind"] = "step";
    record["step"] = step;
    record["loss"] = loss;
    record["lr"] = lr;
    record["grad_norm"] = clip.norm;
    record["tokens"] = tokens_per_step * step;
    record["tokens_per_s"] = tokens_per_s;
    record["step_s"] = step_seconds;
    record["time_s"] = seconds_since(start);
    log_write(record);
    progress.step(step, loss, lr, tokens_per_s, elapsed / static_cast<double>(step - first_step) * (o.steps - step));

    if (o.eval_every > 0 && step % o.eval_every == 0 && step < o.steps) {
      const EvalResult r = evaluate(model, corpus.valid, o.batch, o.seq, device, o.eval_batches, stop, comm);
      if (!r.stopped) {  // a partial evaluation would log a misleading loss
        log_write(eval_record(step, "valid", r));
        progress.message("step " + std::to_string(step) + ": " + describe_eval("valid", r));
      }
    }
    if (o.save_every > 0 && step % o.save_every == 0 && step < o.steps) save(step);
  }
  progress.finish();
  const double train_seconds = seconds_since(loop_start);

  TrainResult result;
  result.steps = step;
  result.parameters = model.num_parameters();
  result.tokens_per_s = step > first_step ? static_cast<double>(tokens_per_step * (step - first_step)) / train_seconds : 0;
  result.checkpoint = step == saved_step ? last_checkpoint : save(step);
  const auto stopped_here = [&] {
    json::Value record = json::Value::object();
    record["kind"] = "stopped";
    record["step"] = step;
    record["checkpoint"] = result.checkpoint;
    log_write(record);
    result.stopped = true;
    result.seconds = seconds_since(start);
    return result;
  };
  if (stopping()) return stopped_here();
  const EvalResult valid = evaluate(model, corpus.valid, o.batch, o.seq, device, 0, stop, comm);
  const EvalResult test =
      valid.stopped ? EvalResult{} : evaluate(model, corpus.test, o.batch, o.seq, device, 0, stop, comm);
  if (valid.stopped || test.stopped) return stopped_here();
  log_write(eval_record(step, "valid", valid));
  log_write(eval_record(step, "test", test));
  result.valid_loss = valid.loss;
  result.valid_ppl = valid.ppl;
  result.test_loss = test.loss;
  result.test_ppl = test.ppl;

  if (o.sample_tokens > 0 && leader) {
    std::vector<int64_t> prompt_ids = corpus.tokenizer->encode(prompt);
    if (prompt_ids.empty()) prompt_ids = corpus.tokenizer->encode("\n");
    const std::vector<int64_t> ids =
        generate(model, prompt_ids, {.tokens = o.sample_tokens, .temperature = o.temperature, .top_k = o.top_k,
                                     .top_p = o.top_p, .seed = derive_seed(o.seed, kSampleStream)},
                 device);
    result.sample = corpus.tokenizer->decode(prompt_ids) + corpus.tokenizer->decode(ids);
    json::Value record = json::Value::object();
    record["kind"] = "sample";
    record["step"] = step;
    record["text"] = result.sample;
    log_write(record);
  }
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace linea::train
