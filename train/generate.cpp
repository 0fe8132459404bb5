#include "train/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace linea::train {

int64_t sample_from_logits(const std::vector<double>& logits, const SampleOptions& o, double u) {
  const int64_t v = static_cast<int64_t>(logits.size());
  LINEA_CHECK(v > 0, "generate", "no logits to sample from");
  if (o.temperature == 0.0) return std::max_element(logits.begin(), logits.end()) - logits.begin();
  // Candidates by decreasing logit (ties by id, so the order is deterministic).
  std::vector<int64_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  const int64_t k = o.top_k > 0 ? std::min(o.top_k, v) : v;
  std::vector<double> p(k);
  const double top = logits[order[0]];
  for (int64_t i = 0; i < k; ++i) p[i] = std::exp((logits[order[i]] - top) / o.temperature);
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  // Nucleus: the shortest prefix whose probability reaches top_p.
  int64_t keep = k;
  double running = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    running += p[i] / total;
    if (running >= o.top_p) {
      keep = i + 1;
      break;
    }
  }
  const double kept_total = std::accumulate(p.begin(), p.begin() + keep, 0.0);
  double threshold = u * kept_total;
  for (int64_t i = 0; i < keep; ++i) {
    threshold -= p[i];
    if (threshold < 0) return order[i];
  }
  return order[keep - 1];
}

std::vector<int64_t> generate(nn::LanguageModel& model, const std::vector<int64_t>& prompt, const SampleOptions& o,
                              Device device, const std::function<void(int64_t)>& on_token) {
  LINEA_CHECK(!prompt.empty(), "generate", "the prompt encodes to no tokens; give a non-empty prompt");
  LINEA_CHECK(o.temperature >= 0 && std::isfinite(o.temperature), "generate", "temperature must be >= 0, got ",
              o.temperature);
  LINEA_CHECK(o.top_p > 0 && o.top_p <= 1, "generate", "top_p must be in (0, 1], got ", o.top_p);
  LINEA_CHECK(o.top_k >= 0, "generate", "top_k must be >= 0, got ", o.top_k);
  LINEA_CHECK(o.tokens >= 0, "generate", "the number of tokens must be >= 0, got ", o.tokens);
  const int64_t vocab = model.config().vocab_size;
  for (int64_t id : prompt)
    LINEA_CHECK(id >= 0 && id < vocab, "generate", "prompt token ", id, " is outside the model's vocabulary of ", vocab);

  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  nn::LanguageModel::State state = model.init_state(1);
  Tensor logits;
  for (int64_t id : prompt) logits = model.step(to(from_vector<int64_t>({id}, {1}), device), state);
  Generator gen(o.seed);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < o.tokens; ++i) {
    const std::vector<double> row = to(logits, kCPU).to_vector<double>();
    const double u = rand({}, kFloat64, &gen).item();
    const int64_t next = sample_from_logits(row, o, u);
    out.push_back(next);
    if (on_token) on_token(next);
    if (i + 1 < o.tokens) logits = model.step(to(from_vector<int64_t>({next}, {1}), device), state);
  }
  model.train(was_training);
  return out;
}

}  // namespace linea::train
