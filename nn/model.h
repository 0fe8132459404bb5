#pragma once
// The decoder-only language model, configured by a layer pattern: one letter per layer, so every
// architecture of the ReGLA paper's Tables 4 and 6 is a configuration, not code.
//
//   ids (B, T) -> embed -> [block] x n_layers -> final norm -> head -> logits (B, T, V)
//   block:  x = x + mixer(norm(x));  x = x + mlp(norm(x))            (pre-norm residual)
//
// The mixer of each block is chosen by its letter (layer_kinds() lists them): "SSSS" is a
// transformer, "RRRR" ReGLA, "SRSRSR" a hybrid. The head is tied to the embedding by default.
// Parameter names: embed.weight, blocks.<i>.mixer_norm.weight, blocks.<i>.mixer.<...>,
// blocks.<i>.mlp_norm.weight, blocks.<i>.mlp.<...>, final_norm.weight, head.weight (untied only).
// Checkpoints written before the block's mixer was named for what it holds (any sequence mixer,
// not only attention) call it blocks.<i>.attn and its norm blocks.<i>.attn_norm: loading one maps
// those names to today's (current_parameter_name below).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nn/config.h"
#include "nn/layers/dropout.h"
#include "nn/layers/embedding.h"
#include "nn/layers/linear.h"
#include "nn/layers/mlp.h"
#include "nn/mixer.h"

namespace linea::nn {

// A layer letter and how to build its mixer from the model config.
struct LayerKind {
  char letter;
  std::string name;         // "softmax", "regla", ...
  std::string description;  // one line for --help and docs
  std::function<std::shared_ptr<SequenceMixer>(const ModelConfig&, Generator&)> make;
};
const std::vector<LayerKind>& layer_kinds();
const LayerKind& layer_kind(char letter);  // Error naming the known letters otherwise

// What a block's mixer saw and gave: its input (the normed hidden state) and its output, (B, T, D).
struct MixerIO {
  Tensor input, output;
};

// The residual block around one mixer.
class Block : public Module {
 public:
  // dropout_gen: the model's one dropout stream, shared by every block (null: no dropout).
  Block(const ModelConfig& config, char letter, Generator& gen, std::shared_ptr<Generator> dropout_gen);
  // (B, T, D); io, when given, receives the mixer's input and output.
  Tensor forward(const Tensor& x, MixerIO* io = nullptr);
  Tensor step(const Tensor& x, DecodeState& mixer_state);   // (B, D)
  // (B, T, D). x must be the caller's own running sum, read by nothing else: without a gradient
  // the residual additions go into the products that end each half (SequenceMixer::
  // residual_prefill), so x's memory may hold the output afterwards (LanguageModel::prefill's h).
  Tensor prefill(const Tensor& x, DecodeState& mixer_state);
  // The output at the last token only, (B, 1, D) (SequenceMixer::prefill_last); x as for prefill.
  Tensor prefill_last(const Tensor& x, DecodeState& mixer_state);

  std::shared_ptr<Norm> mixer_norm, mlp_norm;
  std::shared_ptr<FeedForward> mlp;
  std::shared_ptr<SequenceMixer> mixer;

 private:
  Tensor mlp_branch(const Tensor& x);
  Tensor residual_dropout(const Tensor& x);

  std::shared_ptr<Dropout> dropout_;
};

// A list of modules named "0", "1", ... (so their parameters read blocks.3.mixer...).
class ModuleList : public Module {
 public:
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    items_.push_back(m);
    return register_module(std::to_string(items_.size() - 1), m);
  }
  size_t size() const { return items_.size(); }

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

class LanguageModel : public Module {
 public:
  LanguageModel(const ModelConfig& config, Generator& gen);

  // ids (B, T) Int64 -> logits (B, T, V): float32 for a float32 model, bfloat16 under bfloat16
  // precision (nn/precision.h; cross_entropy takes them and computes in float32).
  Tensor forward(const Tensor& ids);
  // The mixers' inputs and outputs in blocks 0 .. layers-1 on ids; the blocks after them and the
  // head are not run. The teacher's side of attention transfer (train/linearize.h).
  std::vector<MixerIO> mixer_activations(const Tensor& ids, int64_t layers);
  // Mean cross-entropy of predicting targets (B, T) (ignore_index -100 skips a position).
  Tensor loss(const Tensor& ids, const Tensor& targets);

  // Decoding one token per sequence: softmax layers from their KV cache, the others from their
  // fixed-size recurrent state.
  struct State {
    std::vector<std::unique_ptr<DecodeState>> layers;
    int64_t position = 0;  // tokens consumed (the largest, in a stack of sequences)
  };
  State init_state(int64_t batch) const;
  Tensor step(const Tensor& ids, State& state);  // ids (B) Int64 -> logits (B, V)
  // A prompt in one pass: ids (B, T) Int64, T >= 1, through every layer's parallel form
  // (SequenceMixer::prefill) from `state`, which is left where step() continues. Returns the
  // logits of the last position (B, V); logits and state equal those of T calls of step().
  Tensor prefill(const Tensor& ids, State& state);
  // One state for the sequences of `rows` (each of any batch), in order; they may have seen
  // different numbers of tokens (SequenceMixer::stack_states). A row may appear more than once.
  State stack_states(const std::vector<const State*>& rows) const;
  // Sizes every layer's state for `tokens` in all (SequenceMixer::reserve): decoding then neither
  // allocates nor moves memory, as a CUDA graph of the step needs, and a step past it is an error.
  void reserve(State& state, int64_t tokens) const;

  const ModelConfig& config() const { return config_; }
  const std::vector<std::shared_ptr<Block>>& blocks() const { return blocks_; }
  // The stream every dropout mask comes from (seeded by config.seed); a checkpoint saves its
  // offset so a resumed run draws the masks the interrupted one would have.
  Generator& dropout_generator() const { return *dropout_gen_; }

 private:
  // The head's logits of the last hidden states h, in dtype (h's, or bfloat16: activation_dtype).
  Tensor logits(const Tensor& h, DType dtype);
  void check_ids(const Tensor& ids, const char* what) const;
  // The state has this model's layers, and room for new_tokens more in every reserved one.
  void check_state(const State& state, int64_t new_tokens = 0) const;

  ModelConfig config_;
  std::shared_ptr<Generator> dropout_gen_;
  std::shared_ptr<Embedding> embed_;
  std::shared_ptr<ModuleList> block_list_;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<Norm> final_norm_;
  std::shared_ptr<Linear> head_;  // null when tied
};

// Today's name for a key that holds a parameter name of an older version of this model: the
// parameter itself ("blocks.0.attn.q_proj.weight" -> "blocks.0.mixer.q_proj.weight") or an
// optimizer entry made from it ("exp_avg.blocks.0.attn_norm.weight"). Other keys come back as they
// are. train/checkpoint.cpp applies it to everything a checkpoint names.
std::string current_parameter_name(const std::string& key);

// Puts a LoRA adapter on every Linear of the block that config.targets names (nn/layers/lora.h);
// returns how many. The LanguageModel does it for a config with LoRA.
int64_t add_lora_adapters(Block& block, const LoraConfig& config, Generator& gen);

// The norm and the feed-forward part the config names (ModelConfig::norm, ::mlp).
std::shared_ptr<Norm> make_norm(const ModelConfig& config, int64_t dim);
std::shared_ptr<FeedForward> make_feed_forward(const ModelConfig& config, Generator& gen);

}  // namespace linea::nn
