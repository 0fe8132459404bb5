#pragma once
// Sampling text from a model. The prompt goes through the layers' parallel form in one pass
// (LanguageModel::prefill: the chunked scan, the fused attention), which leaves each layer's
// decoding state: linear and gated layers a fixed-size recurrent state, softmax layers a KV cache.
// Then each new token is drawn from
//   softmax(logits / temperature), kept to the top_k most likely and to the smallest set whose
//   probability reaches top_p (nucleus), renormalized;
// temperature 0 takes the most likely token (greedy), and the decoding form advances one token
// (constant work per token for the recurrent layers).
//
// Each step's tokens are drawn on the model's device (sample_tokens): the ids stay there and feed
// the next step. Row r's uniform for each step is drawn on the host from its seeded stream, as
// rand({}, kFloat64, stream).item(), a block of steps at a time; they do not depend on the model,
// so drawing them costs the device nothing. The host reads each step's tokens (for the result
// and on_token) through an asynchronous copy (tensor/host_copy.h) after it has queued the next
// step, so the copy does not leave the device idle.
//
// Before the first step the state is reserved for the longest prompt and its new tokens
// (LanguageModel::reserve), so softmax layers' KV caches are allocated once and the step, which
// then keeps its shapes, is replayed from a CUDA graph on the GPU (train/decode_graph.h) for
// every model.
//
// Several sequences generate as one batch: each prompt is prefilled alone (once, however many
// sequences share it), the states are stacked (LanguageModel::stack_states: prompts of different
// lengths right-aligned in the KV caches, each row at its own position), and every step decodes
// all rows. Each row draws from its own seeded stream, so a row's tokens are those it would get
// generated alone with its seed.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/model.h"
#include "tensor/backend.h"  // SamplingParams

namespace linea::train {

struct SampleOptions {
  int64_t tokens = 200;      // new tokens to draw
  double temperature = 1.0;  // >= 0
  int64_t top_k = 0;         // 0: no limit
  double top_p = 1.0;        // in (0, 1]
  uint64_t seed = 0;
  int64_t max_length = 0;    // the most tokens a sequence may hold, prompt and new ones; 0: no limit
  bool graph = true;         // on CUDA, replay the decode step as a CUDA graph where the model's
                             // state allows it (train/decode_graph.h); the tokens are the same
};

// One sequence of a batch: its prompt and the seed its tokens are drawn with.
struct Request {
  std::vector<int64_t> prompt;
  uint64_t seed = 0;
};

// Returns the new ids (the prompt excluded); on_token, when set, sees each one as it is drawn.
// An empty prompt is an error: the model needs a token to condition on.
std::vector<int64_t> generate(nn::LanguageModel& model, const std::vector<int64_t>& prompt,
                              const SampleOptions& options, Device device, const std::function<void(int64_t)>& on_token = {});

// The batch form: the new ids of every request, in order (options.seed is unused: each request
// has its own). on_token(row, id) sees each token as it is drawn, the rows of one step in order.
// Errors (an empty list or prompt, a prompt longer than max_length, ...) come before any work.
std::vector<std::vector<int64_t>> generate(nn::LanguageModel& model, const std::vector<Request>& requests,
                                           const SampleOptions& options, Device device,
                                           const std::function<void(size_t row, int64_t id)>& on_token = {});

// Checks a prompt's ids against the options: not empty, ids in the vocabulary, and within max_length
// together with the new tokens. `name` says which prompt in errors ("the prompt", "line 3 of
// prompts.txt"). generate() checks every request with it; callers with better names check first. (What the
// tokenizer cannot encode is train/prompt.h's check_prompt, on the text.)
void check_prompt_ids(const std::vector<int64_t>& prompt, const SampleOptions& options, int64_t vocab,
                      const std::string& name);

// Draws an index from logits (V) with the options' temperature, top-k and top-p, using u uniform
// in [0, 1): sample_tokens (autograd/ops.h) on the CPU, the one rule generate() follows on every
// device. Logits that hold a NaN or +inf (or only -inf) are an Error.
int64_t sample_from_logits(const std::vector<double>& logits, const SampleOptions& options, double u);

// The options' temperature, top_k and top_p, as sample_tokens takes them.
SamplingParams sampling_params(const SampleOptions& options);

}  // namespace linea::train
