#include "train/generate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <utility>

#include "train/decode_graph.h"

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

void check_prompt_ids(const std::vector<int64_t>& prompt, const SampleOptions& o, int64_t vocab,
                      const std::string& name) {
  LINEA_CHECK(!prompt.empty(), "generate", name, " encodes to no tokens; give a non-empty prompt");
  for (int64_t id : prompt)
    LINEA_CHECK(id >= 0 && id < vocab, "generate", name, ": token ", id, " is outside the model's vocabulary of ",
                vocab);
  if (o.max_length == 0) return;
  const auto length = static_cast<int64_t>(prompt.size());
  LINEA_CHECK(length <= o.max_length, "generate", name, " is ", length, " tokens, longer than the maximum length ",
              o.max_length, "; shorten it or raise the maximum length");
  LINEA_CHECK(length + o.tokens <= o.max_length, "generate", name, " (", length, " tokens) and ", o.tokens,
              " new tokens make ", length + o.tokens, ", more than the maximum length ", o.max_length,
              "; ask for at most ", o.max_length - length, " new tokens or raise the maximum length");
}

namespace {

void check_options(const SampleOptions& o) {
  LINEA_CHECK(o.temperature >= 0 && std::isfinite(o.temperature), "generate", "temperature must be >= 0, got ",
              o.temperature);
  LINEA_CHECK(o.top_p > 0 && o.top_p <= 1, "generate", "top_p must be in (0, 1], got ", o.top_p);
  LINEA_CHECK(o.top_k >= 0, "generate", "top_k must be >= 0, got ", o.top_k);
  LINEA_CHECK(o.tokens >= 0, "generate", "the number of tokens must be >= 0, got ", o.tokens);
  LINEA_CHECK(o.max_length >= 0, "generate", "the maximum length must be >= 0 (0: no limit), got ", o.max_length);
}

// Prefills every distinct prompt once (batch 1) and stacks the rows' states: the batch's decoding
// state and the logits (B, V) its first tokens are drawn from.
std::pair<nn::LanguageModel::State, Tensor> prefill_rows(nn::LanguageModel& model, const std::vector<Request>& requests,
                                                         Device device) {
  std::map<std::vector<int64_t>, size_t> prefilled;  // prompt -> index in states / logits
  std::vector<nn::LanguageModel::State> states;
  std::vector<Tensor> logits;
  std::vector<size_t> of_row;
  for (const Request& r : requests) {
    auto [at, is_new] = prefilled.try_emplace(r.prompt, states.size());
    if (is_new) {
      const auto length = static_cast<int64_t>(r.prompt.size());
      states.push_back(model.init_state(1));
      logits.push_back(model.prefill(to(from_vector<int64_t>(r.prompt, {1, length}), device), states.back()));
    }
    of_row.push_back(at->second);
  }
  if (requests.size() == 1) return {std::move(states[0]), logits[0]};
  std::vector<const nn::LanguageModel::State*> rows;
  std::vector<Tensor> row_logits;
  for (size_t i : of_row) {
    rows.push_back(&states[i]);
    row_logits.push_back(logits[i]);
  }
  return {model.stack_states(rows), cat(row_logits, 0)};
}

}  // namespace

std::vector<std::vector<int64_t>> generate(nn::LanguageModel& model, const std::vector<Request>& requests,
                                           const SampleOptions& o, Device device,
                                           const std::function<void(size_t, int64_t)>& on_token) {
  check_options(o);
  LINEA_CHECK(!requests.empty(), "generate", "no prompts to continue");
  const int64_t vocab = model.config().vocab_size;
  for (size_t r = 0; r < requests.size(); ++r)
    check_prompt_ids(requests[r].prompt, o, vocab,
                     requests.size() == 1 ? "the prompt" : "prompt " + std::to_string(r + 1));

  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  auto [state, logits] = prefill_rows(model, requests, device);
  std::vector<std::unique_ptr<Generator>> streams;  // one per row (a Generator does not move)
  for (const Request& r : requests) streams.push_back(std::make_unique<Generator>(r.seed));
  const auto batch = static_cast<int64_t>(requests.size());
  std::vector<std::vector<int64_t>> out(requests.size());
  std::vector<int64_t> next(requests.size());
  std::unique_ptr<DecodeGraph> graph;
  if (o.graph && o.tokens > 1) graph = DecodeGraph::capture(model, state, batch, device, nullptr);  // else eager
  for (int64_t i = 0; i < o.tokens; ++i) {
    const std::vector<double> all = to(logits, kCPU).to_vector<double>();  // (B, V), one copy per step
    for (size_t r = 0; r < requests.size(); ++r) {
      const std::vector<double> row(all.begin() + static_cast<int64_t>(r) * vocab,
                                    all.begin() + static_cast<int64_t>(r + 1) * vocab);
      const double u = rand({}, kFloat64, streams[r].get()).item();
      next[r] = sample_from_logits(row, o, u);
      out[r].push_back(next[r]);
      if (on_token) on_token(r, next[r]);
    }
    if (i + 1 < o.tokens) {
      const Tensor ids = to(from_vector<int64_t>(next, {batch}), device);
      logits = graph ? graph->step(ids) : model.step(ids, state);
    }
  }
  model.train(was_training);
  return out;
}

std::vector<int64_t> generate(nn::LanguageModel& model, const std::vector<int64_t>& prompt, const SampleOptions& o,
                              Device device, const std::function<void(int64_t)>& on_token) {
  std::function<void(size_t, int64_t)> each;
  if (on_token) each = [&](size_t, int64_t id) { on_token(id); };
  return generate(model, {Request{prompt, o.seed}}, o, device, each)[0];
}

}  // namespace linea::train
