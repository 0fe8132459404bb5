#include "nn/linearize.h"

#include <algorithm>
#include <map>

#include "nn/layers/lora.h"

namespace linea::nn {

namespace {

const char* kOp = "linearize";

// The config's fields that define the shapes of everything but the mixers, as JSON, so that a
// difference can be named by its key.
json::Value shape_fields(const ModelConfig& c) {
  json::Value v = c.to_json();
  for (const char* free : {"pattern", "layers", "lora", "seed", "dropout"}) v.erase(free);
  return v;
}

// The softmax layer's projections and their names in the linear family's layers.
const std::map<std::string, std::string>& projection_names() {
  static const std::map<std::string, std::string> names = {
      {"q_proj", "q_proj"}, {"k_proj", "k_proj"}, {"v_proj", "v_proj"}, {"o_proj", "out_proj"}};
  return names;
}

std::string layer_prefix(int64_t layer) { return "blocks." + std::to_string(layer) + ".mixer."; }

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::vector<int64_t> linearized_layers(const ModelConfig& source_config, const ModelConfig& target_config) {
  const std::string& from = source_config.pattern;
  const std::string& to = target_config.pattern;
  LINEA_CHECK(from.size() == to.size(), kOp, "the pattern ", to, " has ", to.size(), " layers but the trained model's ",
              from, " has ", from.size(), "; linearizing changes letters, not the number of layers");
  const json::Value a = shape_fields(source_config), b = shape_fields(target_config);
  for (const auto& [key, value] : a.items())
    LINEA_CHECK(b.contains(key) && b[key] == value, kOp, "the new model's ", key, " is ",
                b.contains(key) ? json::dump(b[key]) : "missing", " but the trained model's is ", json::dump(value),
                "; only the layer letters may change");
  std::vector<int64_t> replaced;
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] == to[i]) continue;
    LINEA_CHECK(from[i] == 'S', kOp, "layer ", i, " is ", layer_kind(from[i]).name, " (", std::string(1, from[i]),
                ") in the trained model ", from, "; only softmax layers (S) can be replaced, by ", to[i]);
    layer_kind(to[i]);  // an unknown letter is named here
    replaced.push_back(static_cast<int64_t>(i));
  }
  LINEA_CHECK(!replaced.empty(), kOp, "the pattern ", to, " is the trained model's own: no softmax layer to replace");
  return replaced;
}

Linearization copy_linearized_weights(const ModelConfig& source_config, const StateDict& source, LanguageModel& target) {
  Linearization result;
  result.replaced = linearized_layers(source_config, target.config());
  const std::string& to = target.config().pattern;

  // Each replaced layer must hold Linear q/k/v/out projections to take the softmax ones.
  for (const int64_t layer : result.replaced) {
    const Module& mixer = *target.blocks()[layer]->mixer;
    for (const auto& [soft_name, lin_name] : projection_names()) {
      bool found = false;
      for (const auto& [name, child] : mixer.named_children())
        found |= name == lin_name && std::dynamic_pointer_cast<Linear>(child) != nullptr;
      LINEA_CHECK(found, kOp, "layer ", layer, ": letter ", std::string(1, to[layer]), " (",
                  layer_kind(to[layer]).name, ") has no projection ", lin_name,
                  " to take the softmax layer's ", soft_name, "; choose a linear-attention letter (L, H, A, F, G, R, D)");
    }
  }

  // The source name of every target entry (empty: initialised), checked against the shapes.
  const StateDict target_state = target.state_dict();
  StateDict copies;
  std::map<std::string, std::string> used;  // source name -> target name
  for (const auto& [name, tensor] : target_state) {
    std::string from_name = name;
    if (is_lora_parameter(name)) from_name.clear();
    for (const int64_t layer : result.replaced) {
      const std::string prefix = layer_prefix(layer);
      if (!starts_with(name, prefix) || from_name.empty()) continue;
      from_name.clear();
      const std::string member = name.substr(prefix.size());
      for (const auto& [soft_name, lin_name] : projection_names())
        if (starts_with(member, lin_name + ".")) from_name = prefix + soft_name + member.substr(lin_name.size());
    }
    if (from_name.empty()) {
      result.origins.push_back({name, ""});
      continue;
    }
    const auto it = source.find(from_name);
    LINEA_CHECK(it != source.end(), kOp, "the trained model has no '", from_name, "' for the new model's '", name, "'");
    LINEA_CHECK(it->second.shape() == tensor.shape(), kOp, "the trained model's ", from_name, " is ",
                shape_str(it->second.shape()), " but the new model's ", name, " is ", shape_str(tensor.shape()),
                " (grouped-query softmax heads, a feature_dim or head_dim override and the like change the shapes)");
    copies[name] = it->second;
    used[from_name] = name;
    result.origins.push_back({name, from_name});
  }
  // Whatever the trained model learned must land somewhere: a softmax bias with no counterpart
  // in the linear layer would otherwise be dropped silently.
  for (const auto& [name, tensor] : source)
    LINEA_CHECK(used.count(name), kOp, "the trained model's '", name, "' has no place in the new model ", to,
                " (a projection bias the new layer lacks?)");
  target.load_state_dict(copies, /*strict=*/false);
  return result;
}

}  // namespace linea::nn
