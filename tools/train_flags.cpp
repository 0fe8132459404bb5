#include "tools/train_flags.h"

#include <algorithm>
#include <string_view>

namespace linea::cli {

void add_data_flags(Flags& f, train::TrainOptions& o) {
  f.add("data", &o.data, "text file, or directory with train.txt/valid.txt/test.txt; empty: the fortunes corpus");
  f.add("cache-dir", &o.cache_dir, "where encoded corpora are cached; empty: default; 'none': no cache");
}

void add_training_flags(Flags& f, train::TrainOptions& o) {
  f.add("steps", &o.steps, "optimizer steps");
  f.add("batch", &o.batch, "sequences per micro-batch");
  f.add("seq", &o.seq, "tokens per sequence");
  f.add("accum", &o.accum, "micro-batches per step (gradient accumulation)");
  f.add_choice("optimizer", &o.optimizer, {"adamw", "sgd"}, "optimizer");
  f.add("lr", &o.lr, "peak learning rate");
  f.add("min-lr", &o.min_lr, "learning rate at the end of the decay");
  f.add("warmup", &o.warmup, "linear warmup steps");
  f.add_choice("schedule", &o.schedule, {"cosine", "linear", "constant"}, "decay after warmup");
  f.add("weight-decay", &o.weight_decay, "decoupled weight decay (not on norms, biases, embeddings)");
  f.add("beta1", &o.beta1, "AdamW beta1");
  f.add("beta2", &o.beta2, "AdamW beta2");
  f.add("eps", &o.eps, "AdamW epsilon");
  f.add("momentum", &o.momentum, "SGD momentum");
  f.add("clip", &o.clip, "clip gradients to this global norm; 0: off");
  f.add("lora-rank", &o.lora_rank, "LoRA: train rank-r adapters on --lora-targets only, the rest frozen; 0: off");
  f.add("lora-alpha", &o.lora_alpha, "LoRA: the adapters' update is scaled by alpha / rank");
  f.add("lora-targets", &o.lora_targets, "LoRA: comma-separated among q, k, v, o (the mixer's projections) and mlp");
  f.add("merge-lora", &o.merge_lora, "LoRA: the final checkpoint holds the adapters merged into the weights");
  f.add("seed", &o.seed, "seed of weights, batches, dropout and the sample");
  add_device_flags(f, o.device, o.precision);
  f.add("out", &o.out, "run directory: checkpoints and log.jsonl");
  f.add("resume", &o.resume, "continue the run in --out from its latest checkpoint");
  f.add("eval-every", &o.eval_every, "steps between validation checks; 0: only at the end");
  f.add("eval-batches", &o.eval_batches, "batches per periodic validation check (the final one uses all)");
  f.add("log-every", &o.log_every, "steps between progress lines when not on a terminal");
  f.add("save-every", &o.save_every, "steps between checkpoints (one is always written at the end)");
  f.add("sample-tokens", &o.sample_tokens, "tokens generated after training; 0: none");
  f.add("prompt", &o.prompt, "prompt of the sample; text the tokenizer cannot encode is an error");
  add_sampling_flags(f, o.drop_unknown, o.temperature, o.top_k, o.top_p);
}

void add_sampling_flags(Flags& f, bool& drop_unknown, double& temperature, int64_t& top_k, double& top_p) {
  f.add("drop-unknown", &drop_unknown,
        "leave out of the prompt what the tokenizer cannot encode (with a warning naming it) instead of failing");
  f.add("temperature", &temperature, "sampling temperature; 0: greedy, higher: more random");
  f.add("top-k", &top_k, "sample among the k most likely tokens; 0: all");
  f.add("top-p", &top_p, "nucleus sampling: sample from the smallest set of tokens whose probability reaches p");
}

void add_device_flags(Flags& f, std::string& device, std::string& precision) {
  f.add("device", &device, "cpu, cuda or cuda:N");
  add_precision_flag(f, precision);
}

void add_precision_flag(Flags& f, std::string& precision) {
  f.add_choice("precision", &precision, {"fp32", "bf16"},
               "bf16: products in bfloat16 (float32 accumulation) and, in training and evaluation, bfloat16 "
               "activations where the kernels have them (softmax attention, the MLPs, the logits); float32 "
               "master weights, optimizer state, residual stream, norm statistics and loss");
}

std::string to_flag_name(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

void apply_given_flags(const Flags& flags, const train::TrainOptions& given, train::TrainOptions& into) {
  const json::Value values = given.to_json();  // items() only views it: it must outlive the loop
  for (const auto& [key, value] : values.items()) {
    if (!flags.has(to_flag_name(key)) || !flags.was_set(to_flag_name(key))) continue;
    json::Value one = json::Value::object();
    one[key] = value;
    into.update_from_json(one);
  }
}

std::string shell_quote(const std::string& word) {
  constexpr std::string_view kSafe = "_-./:@+,";
  const bool safe = !word.empty() && std::all_of(word.begin(), word.end(), [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || kSafe.find(c) != kSafe.npos;
  });
  if (safe) return word;
  std::string quoted = "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace linea::cli
