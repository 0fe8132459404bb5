#pragma once
// Sampling text from a model, one token at a time from its decoding state: linear and gated
// layers advance a fixed-size recurrent state (constant work per token), softmax layers attend to
// a KV cache. The prompt is fed the same way, then each new token is drawn from
//   softmax(logits / temperature), kept to the top_k most likely and to the smallest set whose
//   probability reaches top_p (nucleus), renormalized;
// temperature 0 takes the most likely token (greedy).
#include <cstdint>
#include <functional>
#include <vector>

#include "nn/model.h"

namespace linea::train {

struct SampleOptions {
  int64_t tokens = 200;      // new tokens to draw
  double temperature = 1.0;  // >= 0
  int64_t top_k = 0;         // 0: no limit
  double top_p = 1.0;        // in (0, 1]
  uint64_t seed = 0;
};

// Returns the new ids (the prompt excluded); on_token, when set, sees each one as it is drawn.
// An empty prompt is an error: the model needs a token to condition on.
std::vector<int64_t> generate(nn::LanguageModel& model, const std::vector<int64_t>& prompt, const SampleOptions& options,
                              Device device, const std::function<void(int64_t)>& on_token = {});

// Draws an index from logits (V) with the options' temperature, top-k and top-p, using u uniform
// in [0, 1). Exposed for tests.
int64_t sample_from_logits(const std::vector<double>& logits, const SampleOptions& options, double u);

}  // namespace linea::train
