#include "nn/layers/lora.h"

#include <cmath>
#include <set>

#include "nn/init.h"
#include "nn/layers/check.h"

namespace linea::nn {

namespace {

const std::set<std::string>& known_targets() {
  static const std::set<std::string> known = {"q", "k", "v", "o", "mlp"};
  return known;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::string> LoraConfig::target_list() const {
  std::vector<std::string> out;
  std::string word;
  for (size_t i = 0; i <= targets.size(); ++i) {
    if (i < targets.size() && targets[i] != ',') {
      word += targets[i];
      continue;
    }
    LINEA_CHECK(known_targets().count(word), "lora targets", "unknown target '", word, "' in \"", targets,
                "\"; known: q, k, v, o, mlp");
    for (const std::string& seen : out)
      LINEA_CHECK(seen != word, "lora targets", "target '", word, "' is given twice in \"", targets, "\"");
    out.push_back(word);
    word.clear();
  }
  return out;
}

void LoraConfig::validate() const {
  LINEA_CHECK(rank >= 0, "lora rank", "the rank must be >= 0 (0: no LoRA), got ", rank);
  LINEA_CHECK(std::isfinite(alpha) && alpha > 0, "lora alpha", "alpha must be positive, got ", alpha);
  if (enabled()) target_list();
}

json::Value LoraConfig::to_json() const {
  json::Value v = json::Value::object();
  v["rank"] = rank;
  v["alpha"] = alpha;
  v["targets"] = targets;
  return v;
}

LoraConfig LoraConfig::from_json(const json::Value& v) {
  LINEA_CHECK(v.is_object(), "config", "\"lora\" must be an object {rank, alpha, targets}");
  for (const auto& [key, value] : v.items())
    LINEA_CHECK(key == "rank" || key == "alpha" || key == "targets", "config", "unknown key \"lora.", key, "\"");
  LoraConfig c;
  c.rank = json::get_or<int64_t>(v, "rank", c.rank, "config lora");
  c.alpha = json::get_or<double>(v, "alpha", c.alpha, "config lora");
  c.targets = json::get_or<std::string>(v, "targets", c.targets, "config lora");
  c.validate();
  return c;
}

LoraAdapter::LoraAdapter(int64_t in_features, int64_t out_features, int64_t rank, double alpha, Generator& gen)
    : scale_(alpha / static_cast<double>(rank)) {
  check_positive(rank, "rank", "LoraAdapter");
  A = empty({rank, in_features});
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  init::uniform_(A, -bound, bound, gen);
  B = zeros({out_features, rank});
  register_parameter("A", &A);
  register_parameter("B", &B);
}

Tensor LoraAdapter::forward(const Tensor& x) const {
  // Two thin products, never the (out, in) matrix B A: r (in + out) per token instead of in out.
  return matmul(matmul(x, t(A)), t(B)) * scale_;
}

Tensor LoraAdapter::delta() const { return matmul(B, A) * scale_; }

bool is_lora_parameter(const std::string& name) { return ends_with(name, ".lora.A") || ends_with(name, ".lora.B"); }

StateDict merge_lora(const StateDict& state, const LoraConfig& config) {
  NoGradGuard no_grad;
  StateDict merged;
  for (const auto& [name, tensor] : state)
    if (!is_lora_parameter(name)) merged[name] = tensor;
  for (const auto& [name, a] : state) {
    if (!ends_with(name, ".lora.A")) continue;
    const std::string linear = name.substr(0, name.size() - std::string(".lora.A").size());
    const auto b = state.find(linear + ".lora.B");
    const auto w = merged.find(linear + ".weight");
    LINEA_CHECK(b != state.end() && w != merged.end(), "merge_lora", "the adapter '", name, "' has no ",
                b == state.end() ? linear + ".lora.B" : linear + ".weight");
    LINEA_CHECK(b->second.size(0) == w->second.size(0) && a.size(1) == w->second.size(1) &&
                    a.size(0) == b->second.size(1),
                "merge_lora", "the adapter of '", linear, "' (A ", shape_str(a.shape()), ", B ",
                shape_str(b->second.shape()), ") does not fit its weight ", shape_str(w->second.shape()));
    // Computed in the weight's dtype and device; a new tensor, so the caller's state is untouched.
    const Tensor update = matmul(to(b->second, w->second.dtype()), to(a, w->second.dtype())) * config.scale();
    w->second = w->second + to(update, w->second.device());
  }
  return merged;
}

}  // namespace linea::nn
