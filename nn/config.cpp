#include "nn/config.h"

#include <set>

#include "nn/names.h"

namespace linea::nn {

namespace {
const names::Table<NormKind> kNormNames[] = {{NormKind::RMS, "rms"}, {NormKind::Layer, "layer"}};
const names::Table<MlpKind> kMlpNames[] = {
    {MlpKind::Gelu, "gelu"}, {MlpKind::GeluTanh, "gelu_tanh"}, {MlpKind::GeGLU, "geglu"}, {MlpKind::SwiGLU, "swiglu"}};
}  // namespace

std::string norm_kind_name(NormKind kind) { return names::name_in(kNormNames, kind); }
NormKind norm_kind_named(const std::string& name, const char* op) {
  return names::parse_in(kNormNames, name, op, "norm");
}
std::string mlp_kind_name(MlpKind kind) { return names::name_in(kMlpNames, kind); }
MlpKind mlp_kind_named(const std::string& name, const char* op) { return names::parse_in(kMlpNames, name, op, "mlp"); }

int64_t ModelConfig::resolved_mlp_hidden() const {
  if (mlp_hidden > 0) return mlp_hidden;
  if (mlp == MlpKind::Gelu || mlp == MlpKind::GeluTanh) return 4 * d_model;
  const int64_t two_thirds_of_four = (8 * d_model + 2) / 3;
  return (two_thirds_of_four + 7) / 8 * 8;
}

json::Value ModelConfig::options_for(char letter) const {
  const json::Value* found = json::find(layers, std::string(1, letter));
  return found ? *found : json::Value::object();
}

void ModelConfig::validate() const {
  LINEA_CHECK(vocab_size > 0, "config", "vocab_size must be positive, got ", vocab_size);
  LINEA_CHECK(d_model > 0, "config", "d_model must be positive, got ", d_model);
  LINEA_CHECK(heads > 0, "config", "heads must be positive, got ", heads);
  LINEA_CHECK(head_dim > 0 || d_model % heads == 0, "config", "d_model ", d_model, " is not divisible by heads ",
              heads, "; set head_dim");
  LINEA_CHECK(head_dim >= 0, "config", "head_dim must be >= 0, got ", head_dim);
  LINEA_CHECK(!pattern.empty(), "config", "the layer pattern is empty");
  LINEA_CHECK(mlp_hidden >= 0, "config", "mlp_hidden must be >= 0, got ", mlp_hidden);
  LINEA_CHECK(norm_eps >= 0, "config", "norm_eps must be >= 0, got ", norm_eps);
  LINEA_CHECK(dropout >= 0 && dropout < 1, "config", "dropout must be in [0, 1), got ", dropout);
  LINEA_CHECK(layers.is_object(), "config", "\"layers\" must be an object of per-letter options");
  for (const auto& [letter, options] : layers.items()) {
    LINEA_CHECK(letter.size() == 1, "config", "\"layers\" keys are single layer letters, got \"", letter, "\"");
    LINEA_CHECK(options.is_object(), "config", "options of layer '", letter, "' must be an object");
  }
  lora.validate();
}

json::Value ModelConfig::to_json() const {
  json::Value v = {{"vocab_size", vocab_size},
                   {"d_model", d_model},
                   {"heads", heads},
                   {"head_dim", head_dim},
                   {"pattern", pattern},
                   {"norm", norm_kind_name(norm)},
                   {"norm_eps", norm_eps},
                   {"mlp", mlp_kind_name(mlp)},
                   {"mlp_hidden", mlp_hidden},
                   {"tie_embeddings", tie_embeddings},
                   {"dropout", dropout},
                   {"seed", seed},
                   {"layers", layers}};
  if (lora.enabled()) v["lora"] = lora.to_json();
  return v;
}

ModelConfig ModelConfig::from_json(const json::Value& v) {
  LINEA_CHECK(v.is_object(), "config", "a model config must be a JSON object");
  static const std::set<std::string> known = {"vocab_size", "d_model", "heads", "head_dim", "pattern",
                                              "norm", "norm_eps", "mlp", "mlp_hidden", "tie_embeddings",
                                              "dropout", "seed", "layers", "lora"};
  for (const auto& [key, value] : v.items())
    LINEA_CHECK(known.count(key), "config", "unknown key \"", key, "\"");
  ModelConfig c;
  c.vocab_size = json::get_or<int64_t>(v, "vocab_size", c.vocab_size, "config");
  c.d_model = json::get_or<int64_t>(v, "d_model", c.d_model, "config");
  c.heads = json::get_or<int64_t>(v, "heads", c.heads, "config");
  c.head_dim = json::get_or<int64_t>(v, "head_dim", c.head_dim, "config");
  c.pattern = json::get_or<std::string>(v, "pattern", c.pattern, "config");
  c.norm = norm_kind_named(json::get_or<std::string>(v, "norm", norm_kind_name(c.norm), "config"), "config");
  c.norm_eps = json::get_or<double>(v, "norm_eps", c.norm_eps, "config");
  c.mlp = mlp_kind_named(json::get_or<std::string>(v, "mlp", mlp_kind_name(c.mlp), "config"), "config");
  c.mlp_hidden = json::get_or<int64_t>(v, "mlp_hidden", c.mlp_hidden, "config");
  c.tie_embeddings = json::get_or<bool>(v, "tie_embeddings", c.tie_embeddings, "config");
  c.dropout = json::get_or<double>(v, "dropout", c.dropout, "config");
  c.seed = json::get_or<uint64_t>(v, "seed", c.seed, "config");
  if (const json::Value* layers = json::find(v, "layers"); layers && !layers->is_null()) c.layers = *layers;
  if (const json::Value* lora = json::find(v, "lora")) c.lora = LoraConfig::from_json(*lora);
  c.validate();
  return c;
}

}  // namespace linea::nn
