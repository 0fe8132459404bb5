#include "train/linearize.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>

#include "nn/precision.h"
#include "train/batcher.h"
#include "train/checkpoint.h"
#include "train/corpus.h"
#include "train/grad_utils.h"
#include "train/json_file.h"
#include "train/progress.h"
#include "train/run_checkpoint.h"
#include "train/run_log.h"
#include "train/saved_model.h"
#include "train/schedule.h"
#include "train/trainable.h"

namespace linea::train {

namespace {

const char* kOp = "linearize";

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string transfer_root(const std::string& out) { return out + "/transfer"; }

// The new model's config as the trainer builds it (the dropout stream seeded from --seed), with
// or without the LoRA adapters: stage 1 trains the model without them, stage 2 adds them last.
nn::ModelConfig new_model_config(const TrainOptions& o, int64_t vocab, bool with_lora) {
  nn::ModelConfig c = o.model_config(vocab);
  c.seed = derive_seed(o.seed, kDropoutStream);
  if (!with_lora) c.lora = {};
  return c;
}

json::Value numbers(const std::vector<double>& values) {
  json::Value v = json::Value::array();
  for (const double x : values) v.push_back(x);
  return v;
}

std::vector<double> numbers_from(const json::Value& v, const std::string& what) {
  LINEA_CHECK(v.is_array(), kOp, what, " must be an array of numbers");
  std::vector<double> out;
  for (const json::Value& x : v) out.push_back(json::as<double>(x, what));
  return out;
}

std::string describe_mse(const std::vector<int64_t>& layers, const std::vector<double>& mse) {
  std::string text;
  char buf[64];
  for (size_t i = 0; i < layers.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%slayer %lld %.4g", i ? ", " : "", static_cast<long long>(layers[i]), mse[i]);
    text += buf;
  }
  return text;
}

json::Value transfer_eval_record(int64_t step, const char* when, const TransferReport& r,
                                 const std::vector<double>& mse) {
  json::Value v = json::Value::object();
  v["kind"] = "transfer_eval";
  v["step"] = step;
  v["when"] = when;
  v["split"] = "valid";
  v["layers"] = r.layers;
  v["mse"] = numbers(mse);
  return v;
}

// Stage 1 (the header's "stage 1"), in OUT/transfer. Returns the report; *stopped says it was
// asked to stop (after saving).
TransferReport attention_transfer(const LinearizeOptions& lo, const SourceRun& source, const Corpus& corpus,
                                  bool resume, Progress& progress, const StopRequested& stop_requested,
                                  bool* stopped) {
  const auto stop = [&] { return stop_requested && stop_requested(); };
  const TrainOptions& o = lo.train;
  const Device device = Device::parse(o.device);
  const std::string root = transfer_root(o.out);
  const std::optional<std::string> latest = latest_checkpoint(root);
  LINEA_CHECK(resume || !latest, kOp, "'", root, "' already holds an attention transfer; pass --resume");
  std::optional<Checkpoint> saved;
  if (latest) saved = load_checkpoint(*latest);

  Generator unused(0);  // every teacher weight is loaded
  nn::LanguageModel teacher(source.config, unused);
  teacher.load_state_dict(source.checkpoint.model);
  teacher.to(device);
  teacher.eval();

  Generator init_gen(derive_seed(o.seed, kInitStream));
  nn::LanguageModel student(new_model_config(o, corpus.tokenizer->vocab_size(), false), init_gen);
  const nn::Linearization lin = nn::copy_linearized_weights(source.config, source.checkpoint.model, student);
  student.to(device);  // before collecting the parameters: moving replaces the tensors
  const std::vector<nn::NamedParameter> trainable = freeze_all_but(
      student, [&](const std::string& name) { return transfer_trains(lin, name, lo.transfer_qkvo); }, kOp);

  TrainOptions stage = o;
  stage.lr = lo.transfer_lr;
  std::unique_ptr<Optimizer> optimizer = make_optimizer(stage, trainable);
  std::vector<Tensor> params;
  for (const nn::NamedParameter& p : trainable) params.push_back(p.tensor);
  const LrSchedule schedule({.peak_lr = lo.transfer_lr, .min_lr = lo.transfer_lr / 10, .warmup_steps = 0,
                             .total_steps = lo.transfer_steps, .decay = Decay::Cosine});
  RandomBatcher batcher(corpus.train, o.batch, o.seq, derive_seed(o.seed, kTransferBatchStream));

  TransferReport report;
  report.layers = lin.replaced;
  int64_t step = 0;
  if (saved) {
    student.load_state_dict(saved->model);
    optimizer->load_state(saved->optimizer);
    batcher.restore(batcher_state_from_json(saved->trainer.data, "transfer checkpoint data position"));
    step = saved->trainer.step;
    report.mse_before = numbers_from(json::at(saved->trainer.extra, "mse_before", *latest), "mse_before");
    if (const json::Value* after = json::find(saved->trainer.extra, "mse_after")) {
      report.mse_after = numbers_from(*after, "mse_after");
      report.steps = step;
      return report;  // stage 1 is complete
    }
  }
  std::filesystem::create_directories(root);
  RunLog log(root + "/log.jsonl", saved ? step : -1);
  {
    json::Value record = json::Value::object();
    record["kind"] = saved ? "resume" : "config";
    record["stage"] = "transfer";
    record["step"] = step;
    record["linearize"] = lo.to_json();
    record["layers"] = lin.replaced;
    record["trainable_parameters"] = [&] {
      int64_t n = 0;
      for (const Tensor& p : params) n += p.numel();
      return n;
    }();
    log.write(record);
  }
  if (!saved) {
    report.mse_before = transfer_mse(teacher, student, lin.replaced, corpus.valid, o.batch, o.seq, device, o.eval_batches);
    log.write(transfer_eval_record(0, "before", report, report.mse_before));
  }
  progress.message("linea linearize: attention transfer of layers " + describe_mse(lin.replaced, report.mse_before) +
                   " (validation MSE before)" + (saved ? ", resuming from step " + std::to_string(step) : ""));

  auto save = [&](int64_t at, bool done) {
    json::Value extra = json::Value::object();
    extra["stage"] = "transfer";
    extra["linearize"] = lo.to_json();
    extra["mse_before"] = numbers(report.mse_before);
    if (done) extra["mse_after"] = numbers(report.mse_after);
    return save_checkpoint(root, run_checkpoint(student, student.config(), *optimizer, at, batcher, *corpus.tokenizer,
                                                std::move(extra)));
  };

  const int64_t tokens_per_step = o.batch * o.seq;
  const int64_t first_step = step;
  const auto start = Clock::now();
  int64_t saved_step = saved ? step : -1;
  while (step < lo.transfer_steps && !stop()) {
    const double lr = schedule(step);
    optimizer->set_lr(lr);
    optimizer->zero_grad();
    const Batch batch = batcher.next();
    const std::vector<Tensor> losses = transfer_losses(teacher, student, lin.replaced, to(batch.inputs, device));
    Tensor total = losses[0];
    for (size_t i = 1; i < losses.size(); ++i) total = total + losses[i];
    const double loss = total.item();
    LINEA_CHECK(std::isfinite(loss), kOp, "the attention-transfer loss became ", loss, " at step ", step + 1,
                "; try a lower --transfer-lr");
    backward(total);
    const ClipResult clip = plan_clip(o.clip, grad_norm(params));
    LINEA_CHECK(std::isfinite(clip.norm), kOp, "the gradient norm became ", clip.norm, " at step ", step + 1,
                "; try a lower --transfer-lr");
    optimizer->step(clip.scale);
    ++step;

    json::Value record = json::Value::object();
    record["kind"] = "transfer_step";
    record["step"] = step;
    record["loss"] = loss;
    json::Value per_layer = json::Value::array();
    for (const Tensor& l : losses) per_layer.push_back(l.item());
    record["mse"] = per_layer;
    record["lr"] = lr;
    record["grad_norm"] = clip.norm;
    record["time_s"] = seconds_since(start);
    log.write(record);
    const double elapsed = seconds_since(start);
    progress.step(step, loss, lr, static_cast<double>(tokens_per_step * (step - first_step)) / std::max(elapsed, 1e-9),
                  elapsed / static_cast<double>(step - first_step) * (lo.transfer_steps - step));
    if (o.save_every > 0 && step % o.save_every == 0 && step < lo.transfer_steps) {
      save(step, false);
      saved_step = step;
    }
  }
  progress.finish();
  if (step < lo.transfer_steps) {  // asked to stop
    const std::string dir = step == saved_step ? *latest_checkpoint(root) : save(step, false);
    json::Value record = json::Value::object();
    record["kind"] = "stopped";
    record["step"] = step;
    record["checkpoint"] = dir;
    log.write(record);
    *stopped = true;
    report.steps = step;
    return report;
  }
  report.mse_after = transfer_mse(teacher, student, lin.replaced, corpus.valid, o.batch, o.seq, device, o.eval_batches);
  log.write(transfer_eval_record(step, "after", report, report.mse_after));
  save(step, true);
  report.steps = step;
  progress.message("linea linearize: attention transfer done, validation MSE " +
                   describe_mse(lin.replaced, report.mse_after) + " (before: " +
                   describe_mse(lin.replaced, report.mse_before) + ")");
  return report;
}

// What the fine-tuning run's log says about where each weight came from.
json::Value linearize_record(const LinearizeOptions& lo, const SourceRun& source, const nn::Linearization& lin,
                             const TransferReport& transfer) {
  json::Value v = json::Value::object();
  v["kind"] = "linearize";
  v["source"] = source.dir;
  v["from"] = source.config.pattern;
  v["to"] = lo.train.model_config(source.config.vocab_size).pattern;
  v["replaced"] = lin.replaced;
  json::Value weights = json::Value::object();
  for (const nn::WeightOrigin& w : lin.origins) {
    std::string origin = w.source.empty() ? "initialised" : "copied from " + w.source;
    if (lo.transfer_steps > 0 && transfer_trains(lin, w.name, lo.transfer_qkvo)) origin += ", then attention transfer";
    weights[w.name] = origin;
  }
  v["weights"] = weights;
  json::Value t = json::Value::object();
  t["steps"] = transfer.steps;
  t["layers"] = transfer.layers;
  t["mse_before"] = numbers(transfer.mse_before);
  t["mse_after"] = numbers(transfer.mse_after);
  v["transfer"] = t;
  return v;
}

}  // namespace

// ---- options ----

void LinearizeOptions::validate() const {
  LINEA_CHECK(!checkpoint.empty(), kOp, "--checkpoint must name the trained run");
  LINEA_CHECK(transfer_steps >= 0, kOp, "--transfer-steps must be >= 0, got ", transfer_steps);
  LINEA_CHECK(std::isfinite(transfer_lr) && transfer_lr > 0, kOp, "--transfer-lr must be positive, got ", transfer_lr);
  train.validate();
}

json::Value LinearizeOptions::to_json() const {
  return {{"checkpoint", checkpoint},
          {"transfer_steps", transfer_steps},
          {"transfer_lr", transfer_lr},
          {"transfer_qkvo", transfer_qkvo},
          {"train", train.to_json()}};
}

LinearizeOptions LinearizeOptions::from_json(const json::Value& v) {
  LINEA_CHECK(v.is_object(), kOp, "linearize options must be a JSON object");
  for (const auto& [key, value] : v.items())
    LINEA_CHECK(key == "checkpoint" || key == "transfer_steps" || key == "transfer_lr" || key == "transfer_qkvo" ||
                    key == "train",
                kOp, "unknown key \"", key, "\" in the linearize options");
  LinearizeOptions o;
  o.checkpoint = json::get<std::string>(v, "checkpoint", "linearize options");
  o.transfer_steps = json::get<int64_t>(v, "transfer_steps", "linearize options");
  o.transfer_lr = json::get<double>(v, "transfer_lr", "linearize options");
  o.transfer_qkvo = json::get<bool>(v, "transfer_qkvo", "linearize options");
  o.train.update_from_json(json::at(v, "train", "linearize options"));
  return o;
}

std::string linearize_options_path(const std::string& out) { return out + "/linearize.json"; }

SourceRun load_source_run(const std::string& path) {
  namespace fs = std::filesystem;
  LINEA_CHECK(fs::exists(path), kOp, "the trained run '", path, "' does not exist");
  SourceRun s;
  s.dir = path;
  if (!fs::exists(fs::path(path) / "manifest.json")) {
    const std::optional<std::string> latest = latest_checkpoint(path);
    LINEA_CHECK(latest.has_value(), kOp, "'", path, "' holds no checkpoint (no LATEST file and no manifest.json)");
    s.dir = *latest;
  }
  s.checkpoint = load_checkpoint(s.dir);
  s.config = nn::ModelConfig::from_json(s.checkpoint.config);
  LINEA_CHECK(!s.config.lora.enabled(), kOp, "the checkpoint ", s.dir,
              " holds unmerged LoRA adapters; linearize a plain (merged) checkpoint");
  const json::Value* options = json::find(s.checkpoint.trainer.extra, "options");
  LINEA_CHECK(options != nullptr, kOp, "the checkpoint ", s.dir, " records no training options (not a `linea train` run)");
  s.options.update_from_json(*options);
  return s;
}

TrainOptions linearized_train_options(const SourceRun& source, const std::string& pattern, const std::string& out) {
  TrainOptions o = source.options;
  o.model = pattern;
  o.layers = 0;
  o.out = out;
  o.resume = false;
  o.lora_rank = 0;
  o.tokenizer_file.clear();  // the trained model's own tokenizer is used
  return o;
}

// ---- stage 1's pieces ----

std::vector<Tensor> transfer_losses(nn::LanguageModel& teacher, nn::LanguageModel& student,
                                    const std::vector<int64_t>& layers, const Tensor& ids) {
  LINEA_CHECK(!layers.empty() && std::is_sorted(layers.begin(), layers.end()), kOp,
              "transfer_losses needs the replaced layers in increasing order");
  std::vector<nn::MixerIO> io;
  {
    NoGradGuard no_grad;
    io = teacher.mixer_activations(ids, layers.back() + 1);
  }
  std::vector<Tensor> losses;
  for (const int64_t layer : layers) {
    const Tensor y = student.blocks().at(layer)->mixer->forward(io[layer].input);
    losses.push_back(mean(square(y - io[layer].output)));
  }
  return losses;
}

std::vector<double> transfer_mse(nn::LanguageModel& teacher, nn::LanguageModel& student,
                                 const std::vector<int64_t>& layers, std::span<const int64_t> tokens, int64_t batch,
                                 int64_t seq, Device device, int64_t max_batches) {
  NoGradGuard no_grad;
  const EvalBatches batches(tokens, batch, seq);
  const int64_t n = max_batches > 0 ? std::min(max_batches, batches.size()) : batches.size();
  LINEA_CHECK(n > 0, kOp, "the validation split is too short for one window of --seq ", seq);
  std::vector<double> sums(layers.size(), 0.0);
  double weight = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Batch b = batches[i];
    const double tokens_in_batch = static_cast<double>(b.inputs.numel());
    const std::vector<Tensor> losses = transfer_losses(teacher, student, layers, to(b.inputs, device));
    for (size_t l = 0; l < layers.size(); ++l) sums[l] += losses[l].item() * tokens_in_batch;
    weight += tokens_in_batch;
  }
  for (double& s : sums) s /= weight;
  return sums;
}

bool transfer_trains(const nn::Linearization& lin, const std::string& name, bool qkvo) {
  for (const int64_t layer : lin.replaced) {
    if (name.rfind("blocks." + std::to_string(layer) + ".mixer.", 0) != 0) continue;
    if (qkvo) return true;
    for (const nn::WeightOrigin& w : lin.origins)
      if (w.name == name) return w.source.empty();
  }
  return false;
}

// ---- the whole ----

LinearizeResult linearize(const LinearizeOptions& options, bool resume, std::FILE* out,
                          const StopRequested& stop_requested) {
  namespace fs = std::filesystem;
  options.validate();
  const TrainOptions& o = options.train;
  // Both stages (train_model sets the same scope for the fine-tuning again).
  const nn::PrecisionScope precision(nn::parse_precision(o.precision, "linearize"));
  const SourceRun source = load_source_run(options.checkpoint);
  {
    // Refuse what does not fit (a pattern, a letter, a shape) before reading data or writing.
    Generator unused(0);
    nn::LanguageModel probe(new_model_config(o, source.config.vocab_size, false), unused);
    nn::copy_linearized_weights(source.config, source.checkpoint.model, probe);
  }

  const std::string options_file = linearize_options_path(o.out);
  if (resume) {
    LINEA_CHECK(fs::exists(options_file), kOp, "--resume: '", o.out, "' holds no linearization (no linearize.json)");
  } else {
    LINEA_CHECK(!fs::exists(options_file) && !latest_checkpoint(o.out), kOp, "'", o.out,
                "' already holds a run; pass --resume to continue it, or choose another --out");
    fs::create_directories(o.out);
    write_json_file(options_file, options.to_json());
  }
  const bool finetune_started = latest_checkpoint(o.out).has_value();

  LinearizeResult result;
  Progress progress(options.transfer_steps, o.log_every, out);
  CorpusOptions c = o.corpus_options();
  c.log = [&](const std::string& m) { progress.message(m); };
  c.given_tokenizer = tokenizer_from_record(source.checkpoint.trainer.tokenizer, source.dir + "/trainer.json");
  const Corpus corpus = load_corpus(c);
  LINEA_CHECK(corpus.tokenizer->vocab_size() == source.config.vocab_size, kOp, "the tokenizer of ", source.dir,
              " has ", corpus.tokenizer->vocab_size(), " ids but its model ", source.config.vocab_size);

  if (options.transfer_steps > 0) {
    if (finetune_started) {
      // Stage 1 is over; its report comes from its last checkpoint.
      const std::optional<std::string> done = latest_checkpoint(transfer_root(o.out));
      LINEA_CHECK(done.has_value(), kOp, "'", transfer_root(o.out), "' holds no attention-transfer checkpoint");
      const Checkpoint ck = load_checkpoint(*done);
      result.transfer.layers = nn::linearized_layers(source.config, o.model_config(source.config.vocab_size));
      result.transfer.steps = ck.trainer.step;
      result.transfer.mse_before = numbers_from(json::at(ck.trainer.extra, "mse_before", *done), "mse_before");
      result.transfer.mse_after = numbers_from(json::at(ck.trainer.extra, "mse_after", *done), "mse_after");
    } else {
      bool stopped = false;
      result.transfer = attention_transfer(options, source, corpus, resume, progress, stop_requested, &stopped);
      if (stopped) {
        result.stopped = true;
        result.stage = "transfer";
        return result;
      }
    }
  }

  // Stage 2: an ordinary run, started from the copied (and transferred) weights.
  RunStart start;
  start.tokenizer = corpus.tokenizer;
  start.extra["linearize"] = options.to_json();
  start.extra["stage"] = "finetune";
  start.initialize = [&](nn::LanguageModel& model) {
    const nn::Linearization lin = nn::copy_linearized_weights(source.config, source.checkpoint.model, model);
    if (options.transfer_steps > 0) {
      const std::string dir = *latest_checkpoint(transfer_root(o.out));
      const Checkpoint transferred = load_checkpoint(dir);
      int64_t expected = 0;
      for (const auto& [name, t] : model.state_dict()) expected += nn::is_lora_parameter(name) ? 0 : 1;
      LINEA_CHECK(static_cast<int64_t>(transferred.model.size()) == expected, kOp, "the attention-transfer checkpoint ",
                  dir, " holds ", transferred.model.size(), " tensors, the new model ", expected);
      model.load_state_dict(transferred.model, /*strict=*/false);
    }
    return linearize_record(options, source, lin, result.transfer);
  };
  TrainOptions stage = o;
  stage.resume = finetune_started;
  result.train = train_model(stage, out, stop_requested, start);
  result.stopped = result.train.stopped;
  result.stage = "finetune";
  return result;
}

}  // namespace linea::train
