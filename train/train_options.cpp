#include "train/train_options.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "nn/precision.h"

namespace linea::train {

namespace {

// One table binds each option's JSON key to its field, so to_json and update_from_json cannot
// drift apart.
struct Binding {
  std::function<json::Value(const TrainOptions&)> get;
  std::function<void(TrainOptions&, const json::Value&, const std::string& key)> set;
};

template <class T>
Binding bind_field(T TrainOptions::*field) {
  return {[field](const TrainOptions& o) { return json::Value(o.*field); },
          [field](TrainOptions& o, const json::Value& v, const std::string& key) {
            o.*field = json::as<T>(v, "train config key '" + key + "'");
          }};
}

const std::map<std::string, Binding>& bindings() {
  using O = TrainOptions;
  static const std::map<std::string, Binding> table = {
      {"data", bind_field(&O::data)}, {"tokenizer", bind_field(&O::tokenizer)}, {"vocab_size", bind_field(&O::vocab_size)},
      {"tokenizer_file", bind_field(&O::tokenizer_file)}, {"cache_dir", bind_field(&O::cache_dir)}, {"model", bind_field(&O::model)},
      {"layers", bind_field(&O::layers)}, {"d_model", bind_field(&O::d_model)}, {"heads", bind_field(&O::heads)}, {"mlp", bind_field(&O::mlp)},
      {"mlp_hidden", bind_field(&O::mlp_hidden)},
      {"norm", bind_field(&O::norm)}, {"tie_embeddings", bind_field(&O::tie_embeddings)}, {"dropout", bind_field(&O::dropout)},
      {"layer_options", bind_field(&O::layer_options)}, {"steps", bind_field(&O::steps)}, {"batch", bind_field(&O::batch)},
      {"seq", bind_field(&O::seq)}, {"accum", bind_field(&O::accum)}, {"optimizer", bind_field(&O::optimizer)}, {"lr", bind_field(&O::lr)},
      {"min_lr", bind_field(&O::min_lr)}, {"warmup", bind_field(&O::warmup)}, {"schedule", bind_field(&O::schedule)},
      {"weight_decay", bind_field(&O::weight_decay)}, {"beta1", bind_field(&O::beta1)}, {"beta2", bind_field(&O::beta2)},
      {"eps", bind_field(&O::eps)}, {"momentum", bind_field(&O::momentum)}, {"clip", bind_field(&O::clip)}, {"seed", bind_field(&O::seed)},
      {"device", bind_field(&O::device)}, {"precision", bind_field(&O::precision)}, {"out", bind_field(&O::out)}, {"eval_every", bind_field(&O::eval_every)},
      {"eval_batches", bind_field(&O::eval_batches)}, {"log_every", bind_field(&O::log_every)},
      {"save_every", bind_field(&O::save_every)}, {"sample_tokens", bind_field(&O::sample_tokens)}, {"prompt", bind_field(&O::prompt)},
      {"drop_unknown", bind_field(&O::drop_unknown)},
      {"temperature", bind_field(&O::temperature)}, {"top_k", bind_field(&O::top_k)}, {"top_p", bind_field(&O::top_p)},
      {"lora_rank", bind_field(&O::lora_rank)}, {"lora_alpha", bind_field(&O::lora_alpha)},
      {"lora_targets", bind_field(&O::lora_targets)}, {"merge_lora", bind_field(&O::merge_lora)},
  };
  return table;
}

}  // namespace

bool may_change_on_resume(const std::string& key) {
  static const std::set<std::string> run_control = {"steps", "device", "out", "eval_every", "eval_batches", "log_every",
                                                    "save_every", "sample_tokens", "prompt", "drop_unknown",
                                                    "temperature", "top_k", "top_p", "cache_dir", "data",
                                                    "merge_lora", "precision"};
  return run_control.count(key) > 0;
}

json::Value TrainOptions::to_json() const {
  json::Value v = json::Value::object();
  for (const auto& [key, binding] : bindings()) v[key] = binding.get(*this);
  return v;
}

void TrainOptions::update_from_json(const json::Value& value) {
  LINEA_CHECK(value.is_object(), "train config", "a training config must be a JSON object");
  for (const auto& [key, v] : value.items()) {
    const auto it = bindings().find(key);
    LINEA_CHECK(it != bindings().end(), "train config", "unknown key \"", key, "\"");
    it->second.set(*this, v, key);
  }
}

CorpusOptions TrainOptions::corpus_options() const {
  CorpusOptions c;
  c.data = data;
  c.tokenizer = tokenizer;
  c.vocab_size = vocab_size;
  c.cache_dir = cache_dir == "none" ? "" : (cache_dir.empty() ? default_cache_dir() : cache_dir);
  return c;
}

nn::ModelConfig TrainOptions::model_config(int64_t vocab) const {
  nn::ModelConfig c;
  c.vocab_size = vocab;
  c.d_model = d_model;
  c.heads = heads;
  c.pattern = model.size() == 1 && layers > 0 ? std::string(layers, model[0]) : model;
  c.mlp = nn::mlp_kind_named(mlp, "train");
  c.mlp_hidden = mlp_hidden;
  c.norm = nn::norm_kind_named(norm, "train");
  c.tie_embeddings = tie_embeddings;
  c.dropout = dropout;
  c.seed = seed;
  c.layers = json::parse(layer_options);
  c.lora = {.rank = lora_rank, .alpha = lora_alpha, .targets = lora_targets};
  c.validate();
  return c;
}

void TrainOptions::validate() const {
  auto positive = [](int64_t v, const char* name) { LINEA_CHECK(v > 0, "train", "--", name, " must be positive, got ", v); };
  positive(steps, "steps");
  positive(batch, "batch");
  positive(seq, "seq");
  positive(accum, "accum");
  positive(d_model, "d-model");
  positive(heads, "heads");
  LINEA_CHECK(layers >= 0, "train", "--layers must be >= 0, got ", layers);
  LINEA_CHECK(layers == 0 || model.size() == 1, "train", "--layers repeats a one-letter pattern; the pattern \"", model,
              "\" already gives the layers");
  LINEA_CHECK(lr > 0 && std::isfinite(lr), "train", "--lr must be positive, got ", lr);
  LINEA_CHECK(min_lr >= 0 && min_lr <= lr, "train", "--min-lr must be in [0, lr], got ", min_lr);
  LINEA_CHECK(warmup >= 0, "train", "--warmup must be >= 0, got ", warmup);
  LINEA_CHECK(warmup <= steps, "train", "--warmup ", warmup, " is longer than the run (--steps ", steps,
              "); pass a --warmup of at most ", steps);
  LINEA_CHECK(mlp_hidden >= 0, "train", "--mlp-hidden must be >= 0 (0: the default width), got ", mlp_hidden);
  LINEA_CHECK(weight_decay >= 0, "train", "--weight-decay must be >= 0, got ", weight_decay);
  LINEA_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "train", "--beta1 and --beta2 must be in [0, 1)");
  LINEA_CHECK(eps > 0, "train", "--eps must be positive, got ", eps);
  LINEA_CHECK(clip >= 0, "train", "--clip must be >= 0, got ", clip);
  LINEA_CHECK(eval_every >= 0 && save_every >= 0 && eval_batches >= 0, "train",
              "--eval-every, --save-every and --eval-batches must be >= 0");
  LINEA_CHECK(optimizer == "adamw" || optimizer == "sgd", "train", "--optimizer must be adamw or sgd, got ", optimizer);
  LINEA_CHECK(!out.empty(), "train", "--out must name a directory");
  nn::parse_precision(precision, "train");
  LINEA_CHECK(lora_rank >= 0, "train", "--lora-rank must be >= 0 (0: no LoRA), got ", lora_rank);
  LINEA_CHECK(std::isfinite(lora_alpha) && lora_alpha > 0, "train", "--lora-alpha must be positive, got ", lora_alpha);
  if (lora_rank > 0) nn::LoraConfig{.rank = lora_rank, .alpha = lora_alpha, .targets = lora_targets}.validate();
  json::Value parsed;
  try {
    parsed = json::parse(layer_options);
  } catch (const Error& e) {
    fail("train", "--layer-options is not valid JSON: ", e.what());
  }
  LINEA_CHECK(parsed.is_object(), "train", "--layer-options must be a JSON object of per-letter options");
}

}  // namespace linea::train
