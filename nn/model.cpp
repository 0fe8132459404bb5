#include "nn/model.h"

#include <algorithm>
#include <map>

#include "nn/layers/fused_product.h"
#include "nn/layers/mlp.h"
#include "nn/layers/norm.h"
#include "nn/precision.h"

namespace linea::nn {

std::shared_ptr<Norm> make_norm(const ModelConfig& config, int64_t dim) {
  switch (config.norm) {
    case NormKind::Layer: return std::make_shared<LayerNorm>(dim, config.norm_eps);
    case NormKind::RMS: return std::make_shared<RMSNorm>(dim, config.norm_eps);
  }
  fail("config", "unknown norm kind");
}

std::shared_ptr<FeedForward> make_feed_forward(const ModelConfig& config, Generator& gen) {
  const int64_t d = config.d_model, hidden = config.resolved_mlp_hidden();
  auto options = [](Activation act) { return MLPOptions{.activation = act, .bias = false}; };
  switch (config.mlp) {
    case MlpKind::Gelu: return std::make_shared<MLP>(d, hidden, gen, options(Activation::Gelu));
    case MlpKind::GeluTanh: return std::make_shared<MLP>(d, hidden, gen, options(Activation::GeluTanh));
    case MlpKind::GeGLU: return std::make_shared<GatedMLP>(d, hidden, gen, options(Activation::Gelu));
    case MlpKind::SwiGLU: return std::make_shared<GatedMLP>(d, hidden, gen, options(Activation::Silu));
  }
  fail("config", "unknown mlp kind");
}

const LayerKind& layer_kind(char letter) {
  for (const LayerKind& kind : layer_kinds())
    if (kind.letter == letter) return kind;
  std::string known;
  for (const LayerKind& kind : layer_kinds()) known += std::string(known.empty() ? "" : ", ") + kind.letter + " (" + kind.name + ")";
  fail("config", "unknown layer letter '", std::string(1, letter), "' in the pattern; known letters: ", known);
}

// ---- names of older versions ----

namespace {

// The block's members as older checkpoints name them -> today's names.
const std::map<std::string, std::string>& renamed_block_members() {
  static const std::map<std::string, std::string> renamed = {{"attn", "mixer"}, {"attn_norm", "mixer_norm"}};
  return renamed;
}

std::vector<std::string> split_dotted(const std::string& key) {
  std::vector<std::string> parts(1);
  for (char c : key) {
    if (c == '.') parts.emplace_back();
    else parts.back() += c;
  }
  return parts;
}

bool is_index(const std::string& part) {
  return !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string current_parameter_name(const std::string& key) {
  std::vector<std::string> parts = split_dotted(key);
  // "blocks.<i>.<member>" anywhere in the key: an optimizer entry puts its kind in front.
  for (size_t i = 0; i + 2 < parts.size(); ++i) {
    if (parts[i] != "blocks" || !is_index(parts[i + 1])) continue;
    const auto renamed = renamed_block_members().find(parts[i + 2]);
    if (renamed != renamed_block_members().end()) parts[i + 2] = renamed->second;
  }
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) out += "." + parts[i];
  return out;
}

// ---- Block ----

Block::Block(const ModelConfig& config, char letter, Generator& gen, std::shared_ptr<Generator> dropout_gen) {
  const int64_t d = config.d_model;
  mixer_norm = register_module("mixer_norm", make_norm(config, d));
  mixer = register_module("mixer", layer_kind(letter).make(config, gen));
  mlp_norm = register_module("mlp_norm", make_norm(config, d));
  mlp = register_module("mlp", make_feed_forward(config, gen));
  if (config.dropout > 0) dropout_ = std::make_shared<Dropout>(config.dropout, std::move(dropout_gen));
}

Tensor Block::residual_dropout(const Tensor& x) {
  if (!dropout_) return x;
  dropout_->train(is_training());
  return dropout_->forward(x);
}

Tensor Block::mlp_branch(const Tensor& x) {
  return mlp->forward(mlp_norm->forward(x, activation_dtype(x)));
}

Tensor Block::forward(const Tensor& x, MixerIO* io) {
  // Under bfloat16 precision the branches run on bfloat16 activations where their kernels allow
  // (nn/precision.h); the residual stream x stays in its dtype, which each branch's last product
  // writes (the to()s below are then no work).
  const DType mixer_dtype = mixer->takes_bfloat16() ? activation_dtype(x) : x.dtype();
  const Tensor mixer_in = mixer_norm->forward(x, mixer_dtype);
  const Tensor mixer_out = mixer->forward(mixer_in);
  if (io) *io = {linea::to(mixer_in, x.dtype()), linea::to(mixer_out, x.dtype())};  // in the stream's dtype
  const Tensor h = x + residual_dropout(linea::to(mixer_out, x.dtype()));
  return h + residual_dropout(linea::to(mlp_branch(h), h.dtype()));
}

Tensor Block::step(const Tensor& x, DecodeState& mixer_state) {
  // x + mixer(norm(x)), then h + mlp(norm(h)), each norm and addition folded into a product.
  const Tensor h = mixer->residual_step(x, *mixer_norm, mixer_state);
  return mlp->residual_step(h, *mlp_norm);
}

Tensor Block::prefill(const Tensor& x, DecodeState& mixer_state) {
  const Tensor h = mixer->residual_prefill(x, *mixer_norm, mixer_state, /*last_only=*/false);
  return mlp->residual_prefill(h, *mlp_norm);
}

Tensor Block::prefill_last(const Tensor& x, DecodeState& mixer_state) {
  const Tensor h = mixer->residual_prefill(x, *mixer_norm, mixer_state, /*last_only=*/true);
  return mlp->residual_prefill(h, *mlp_norm);
}

// ---- LoRA ----

namespace {

// The LoRA target a mixer's projection answers to ("q_proj" -> "q"; "" for the others).
std::string projection_target(const std::string& member) {
  if (member == "q_proj") return "q";
  if (member == "k_proj") return "k";
  if (member == "v_proj") return "v";
  if (member == "o_proj" || member == "out_proj") return "o";
  return "";
}

}  // namespace

int64_t add_lora_adapters(Block& block, const LoraConfig& config, Generator& gen) {
  const std::vector<std::string> targets = config.target_list();
  auto wanted = [&](const std::string& target) {
    return !target.empty() && std::find(targets.begin(), targets.end(), target) != targets.end();
  };
  int64_t added = 0;
  auto adapt = [&](const Module& parent, const std::function<std::string(const std::string&)>& target_of) {
    for (const auto& [name, child] : parent.named_children()) {
      const auto linear = std::dynamic_pointer_cast<Linear>(child);
      if (!linear || !wanted(target_of(name))) continue;
      linear->add_lora(config.rank, config.alpha, gen);
      ++added;
    }
  };
  adapt(*block.mixer, projection_target);
  adapt(*block.mlp, [](const std::string&) { return std::string("mlp"); });
  return added;
}

// ---- LanguageModel ----

LanguageModel::LanguageModel(const ModelConfig& config, Generator& gen)
    : config_(config), dropout_gen_(std::make_shared<Generator>(config.seed)) {
  config_.validate();
  for (char letter : config_.pattern) layer_kind(letter);  // fail before building anything
  embed_ = register_module("embed", std::make_shared<Embedding>(config_.vocab_size, config_.d_model, gen));
  block_list_ = register_module("blocks", std::make_shared<ModuleList>());
  for (char letter : config_.pattern) blocks_.push_back(block_list_->push_back(std::make_shared<Block>(config_, letter, gen, dropout_gen_)));
  final_norm_ = register_module("final_norm", make_norm(config_, config_.d_model));
  if (!config_.tie_embeddings)
    head_ = register_module("head", std::make_shared<Linear>(config_.d_model, config_.vocab_size, gen,
                                                             LinearOptions{.bias = false, .init = LinearInit::Normal}));
  // Adapters last, so the base weights draw the same numbers with and without them.
  if (config_.lora.enabled()) {
    int64_t adapters = 0;
    for (const auto& block : blocks_) adapters += add_lora_adapters(*block, config_.lora, gen);
    LINEA_CHECK(adapters > 0, "config", "the LoRA targets \"", config_.lora.targets, "\" name no layer of the pattern ",
                config_.pattern);
  }
}

void LanguageModel::check_ids(const Tensor& ids, const char* what) const {
  LINEA_CHECK(ids.defined() && ids.dtype() == kInt64, "LanguageModel", what, " must be int64 token ids, got ",
              ids.describe());
}

Tensor LanguageModel::logits(const Tensor& h, DType dtype) {
  const Tensor normed = final_norm_->forward(h, dtype);
  return head_ ? head_->forward(normed) : linear_product(normed, embed_->weight);
}

Tensor LanguageModel::forward(const Tensor& ids) {
  check_ids(ids, "ids");
  LINEA_CHECK(ids.dim() == 2, "LanguageModel", "ids must be (batch, time), got ", ids.describe());
  Tensor h = embed_->forward(ids);
  for (const auto& block : blocks_) h = block->forward(h);
  return logits(h, activation_dtype(h));
}

std::vector<MixerIO> LanguageModel::mixer_activations(const Tensor& ids, int64_t layers) {
  check_ids(ids, "ids");
  LINEA_CHECK(ids.dim() == 2, "LanguageModel", "ids must be (batch, time), got ", ids.describe());
  LINEA_CHECK(layers >= 0 && layers <= static_cast<int64_t>(blocks_.size()), "LanguageModel", "mixer_activations: ",
              layers, " layers asked of a model with ", blocks_.size());
  std::vector<MixerIO> out(layers);
  Tensor h = embed_->forward(ids);
  for (int64_t i = 0; i < layers; ++i) h = blocks_[i]->forward(h, &out[i]);
  return out;
}

Tensor LanguageModel::loss(const Tensor& ids, const Tensor& targets) {
  check_ids(targets, "targets");
  LINEA_CHECK(targets.shape() == ids.shape(), "LanguageModel", "targets ", targets.describe(), " must match ids ",
              ids.describe());
  return cross_entropy(forward(ids), targets);
}

LanguageModel::State LanguageModel::init_state(int64_t batch) const {
  State state;
  for (const auto& block : blocks_) state.layers.push_back(block->mixer->init_state(batch));
  return state;
}

void LanguageModel::check_state(const State& state, int64_t new_tokens) const {
  LINEA_CHECK(state.layers.size() == blocks_.size(), "LanguageModel", "the decoding state has ", state.layers.size(),
              " layers, the model ", blocks_.size());
  // Before any layer runs, so that an error leaves every layer where it was.
  for (size_t i = 0; i < state.layers.size(); ++i) {
    const int64_t limit = state.layers[i]->token_limit(), tokens = state.layers[i]->position + new_tokens;
    LINEA_CHECK(limit == 0 || tokens <= limit, "LanguageModel", "layer ", i, "'s state was reserved for ", limit,
                " tokens and token ", tokens, " does not fit; reserve more (generate: raise the maximum length)");
  }
}

Tensor LanguageModel::prefill(const Tensor& ids, State& state) {
  check_ids(ids, "ids");
  LINEA_CHECK(ids.dim() == 2 && ids.size(1) > 0, "LanguageModel",
              "prefill takes (batch, time) ids with at least one token, got ", ids.describe());
  check_state(state, ids.size(1));
  // Only the next token's logits are wanted: the last layer computes its output at the last
  // token alone (its state still takes in every token), and the head sees that one. h, the
  // embedding's fresh output, is this function's own: the blocks may add into its memory.
  Tensor h = embed_->forward(ids);
  for (size_t i = 0; i < blocks_.size(); ++i)
    h = i + 1 < blocks_.size() ? blocks_[i]->prefill(h, *state.layers[i]) : blocks_[i]->prefill_last(h, *state.layers[i]);
  state.position += ids.size(1);
  const Tensor last = select(h, 1, h.size(1) - 1);
  return logits(last, last.dtype());  // float32 for the sampler, whatever the products' precision
}

LanguageModel::State LanguageModel::stack_states(const std::vector<const State*>& rows) const {
  LINEA_CHECK(!rows.empty(), "LanguageModel", "stack_states needs at least one state");
  for (const State* row : rows) check_state(*row);
  State stacked;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    std::vector<const DecodeState*> layer_rows;
    for (const State* row : rows) layer_rows.push_back(row->layers[i].get());
    stacked.layers.push_back(blocks_[i]->mixer->stack_states(layer_rows));
  }
  for (const State* row : rows) stacked.position = std::max(stacked.position, row->position);
  return stacked;
}

void LanguageModel::reserve(State& state, int64_t tokens) const {
  check_state(state);
  for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i]->mixer->reserve(*state.layers[i], tokens);
}

Tensor LanguageModel::step(const Tensor& ids, State& state) {
  check_ids(ids, "ids");
  LINEA_CHECK(ids.dim() == 1, "LanguageModel", "step takes one id per sequence, (batch), got ", ids.describe());
  check_state(state, 1);
  Tensor h = embed_->forward(ids);
  for (size_t i = 0; i < blocks_.size(); ++i) h = blocks_[i]->step(h, *state.layers[i]);
  ++state.position;
  // The final norm folded into the head's product.
  if (head_) return fused_product(*head_, h, {.input_norm = final_norm_.get()});
  return fused_product(embed_->weight, Tensor(), h, {.input_norm = final_norm_.get()});
}

}  // namespace linea::nn
