#pragma once
// Everything `linea train` can be told, with the defaults of the default run: a small ReGLA model
// trained on the default corpus (the fortunes package) on the CPU in a few minutes on 2 cores.
// The command line (tools/train_command.cpp) maps one flag to each field; a JSON config file
// uses the same names.
#include <cstdint>
#include <string>

#include "nn/config.h"
#include "nn/json.h"
#include "train/corpus.h"

namespace linea::train {

struct TrainOptions {
  // Data.
  std::string data;              // "" = the default corpus; a text file; or a dir of train/valid/test.txt
  std::string tokenizer = "char";  // byte | char | word | bpe (built from the train split)
  int64_t vocab_size = 4096;     // bpe's target vocabulary
  std::string tokenizer_file;    // a tokenizer saved by `linea tokenizer train` (overrides --tokenizer)
  std::string cache_dir;         // "" = the default cache dir; "none" = no cache

  // Model.
  std::string model = "RRRR";    // the layer pattern, one letter per layer (linea train --help-layers)
  int64_t layers = 0;            // > 0 with a one-letter pattern: that many layers of it
  int64_t d_model = 128;
  int64_t heads = 4;
  std::string mlp = "swiglu";
  int64_t mlp_hidden = 0;        // 0: the --mlp kind's default width (nn/config.h)
  std::string norm = "rms";
  bool tie_embeddings = true;
  double dropout = 0.0;
  std::string layer_options = "{}";  // JSON: per-letter options (nn/config.h "layers")

  // Optimization.
  int64_t steps = 500;
  int64_t batch = 16;
  int64_t seq = 128;
  int64_t accum = 1;             // micro-batches per step (gradient accumulation)
  std::string optimizer = "adamw";  // adamw | sgd
  double lr = 3e-3;
  double min_lr = 3e-4;
  int64_t warmup = 50;
  std::string schedule = "cosine";  // cosine | linear | constant
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double momentum = 0.9;         // sgd
  double clip = 1.0;             // max global gradient norm; 0 = no clipping

  // LoRA fine-tuning (nn/layers/lora.h): rank > 0 puts adapters on the targets and trains only
  // them, the base weights frozen; at the end of the run they are merged into the weights.
  int64_t lora_rank = 0;
  double lora_alpha = 16.0;
  std::string lora_targets = "q,k,v,o";  // of q, k, v, o, mlp
  bool merge_lora = true;        // the final checkpoint holds merged weights (a plain model)

  // Run.
  uint64_t seed = 0;
  std::string device = "cpu";
  std::string precision = "fp32";  // fp32 | bf16: bfloat16 products and activations (nn/precision.h)
  std::string out = "runs/default";
  bool resume = false;
  int64_t eval_every = 100;
  int64_t eval_batches = 8;      // batches per periodic evaluation (the final one uses all)
  int64_t log_every = 10;        // plain progress lines when not on a terminal
  int64_t save_every = 250;
  int64_t sample_tokens = 300;   // generated after training
  std::string prompt = "\n";     // of the sample, as `linea generate`'s (train/prompt.h)
  bool drop_unknown = false;     // leave out of the prompt what the tokenizer cannot encode
  double temperature = 0.8;
  int64_t top_k = 0;
  double top_p = 0.95;

  nn::ModelConfig model_config(int64_t vocab_size) const;
  // Where the corpus comes from and how it is encoded (data, tokenizer, vocabulary, cache; "none"
  // turns the cache off); the caller adds a given tokenizer and where messages go.
  CorpusOptions corpus_options() const;
  // Errors name the flag and the bad value.
  void validate() const;
  json::Value to_json() const;
  // Fields present in value replace this object's; unknown keys are errors.
  void update_from_json(const json::Value& value);
};

// The options a resumed run may change (how long, how it reports); any other difference from the
// checkpoint's options would make the resumed run a different run.
bool may_change_on_resume(const std::string& key);

}  // namespace linea::train
