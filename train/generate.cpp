#include "train/generate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "tensor/host_copy.h"
#include "train/decode_graph.h"

namespace linea::train {

SamplingParams sampling_params(const SampleOptions& o) { return {o.temperature, o.top_k, o.top_p}; }

int64_t sample_from_logits(const std::vector<double>& logits, const SampleOptions& o, double u) {
  const auto v = static_cast<int64_t>(logits.size());
  LINEA_CHECK(v > 0, "generate", "no logits to sample from");
  const Tensor id = sample_tokens(from_vector<double>(logits, {1, v}), from_vector<double>({u}, {1}), sampling_params(o));
  const int64_t drawn = static_cast<int64_t>(id.item());
  LINEA_CHECK(drawn >= 0, "generate", "cannot sample from logits that hold a NaN or +inf, or only -inf");
  return drawn;
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

// Steps whose uniforms go to the device together (one small upload per block, not per step).
constexpr int64_t kStepsPerUpload = 256;

// Row r's uniforms for the next `steps` steps, as column r of a (steps, B) float64 tensor on
// `device`: drawn on the host from the row's stream, one per step in step order, the very numbers
// one draw per row per step would give (they do not depend on the model).
Tensor draw_uniforms(const std::vector<std::unique_ptr<Generator>>& streams, int64_t steps, Device device) {
  const auto batch = static_cast<int64_t>(streams.size());
  std::vector<double> u(static_cast<size_t>(steps * batch));
  for (int64_t r = 0; r < batch; ++r)
    for (int64_t s = 0; s < steps; ++s) u[s * batch + r] = rand({}, kFloat64, streams[r].get()).item();
  return to(from_vector<double>(u, {steps, batch}), device);
}

// sample_tokens gives -1 for a row it cannot sample: say which, instead of an embedding's
// "index -1 is out of range" one step later.
void check_drawn(const std::vector<int64_t>& ids, int64_t step) {
  for (size_t r = 0; r < ids.size(); ++r)
    LINEA_CHECK(ids[r] >= 0, "generate", "the model's logits for sequence ", r + 1, " at new token ", step + 1,
                " hold a NaN or +inf (or only -inf): cannot sample from them");
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
  // Every state sized once for the longest row and its new tokens: the KV caches then neither
  // grow nor move while decoding, and the step can be replayed from a graph.
  size_t longest = 0;
  for (const Request& r : requests) longest = std::max(longest, r.prompt.size());
  model.reserve(state, static_cast<int64_t>(longest) + std::max<int64_t>(o.tokens, 1));
  std::vector<std::unique_ptr<Generator>> streams;  // one per row (a Generator does not move)
  for (const Request& r : requests) streams.push_back(std::make_unique<Generator>(r.seed));
  const auto batch = static_cast<int64_t>(requests.size());
  const SamplingParams params = sampling_params(o);
  // The ids stay on the device, where they feed the next step. The host gets each step's ids
  // through a copy beside the device's stream, read after the next step is queued: a step never
  // waits for the copy, and the next step only reads the ids, so nothing overwrites them early.
  HostCopy to_host(batch * sizeof(int64_t), device, HostCopy::Stream::Beside);
  std::vector<std::vector<int64_t>> out(requests.size());
  Tensor uniforms;  // (steps, B): a block of steps' draws, on the device
  auto step_uniforms = [&](int64_t i) {
    if (i % kStepsPerUpload == 0) uniforms = draw_uniforms(streams, std::min(kStepsPerUpload, o.tokens - i), device);
    return select(uniforms, 0, i % kStepsPerUpload);
  };
  // On CUDA, the step and the draw replayed from a graph where the model allows
  // (train/decode_graph.h); the ids it returns stay put through the next step.
  std::unique_ptr<DecodeGraph> graph;
  if (o.graph && o.tokens > 1) graph = DecodeGraph::capture(model, state, batch, device, nullptr, params);
  Tensor ids;  // (B), the tokens of step i
  if (o.tokens > 0) {
    ids = sample_tokens(logits, step_uniforms(0), params);
    to_host.start(ids);
  }
  for (int64_t i = 0; i < o.tokens; ++i) {
    Tensor next;
    if (i + 1 < o.tokens) {
      try {
        const Tensor u = step_uniforms(i + 1);
        next = graph ? graph->step_and_draw(ids, u) : sample_tokens(model.step(ids, state), u, params);
      } catch (const Error&) {
        check_drawn(to_host.wait().to_vector<int64_t>(), i);  // an unsampleable row says so
        throw;
      }
    }
    const std::vector<int64_t> drawn = to_host.wait().to_vector<int64_t>();
    check_drawn(drawn, i);
    for (size_t r = 0; r < requests.size(); ++r) {
      out[r].push_back(drawn[r]);
      if (on_token) on_token(r, drawn[r]);
    }
    ids = next;
    if (ids.defined()) to_host.start(ids);
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
