// Gradient-check rows of softmax attention: full, grouped-query, multi-query, windowed, no RoPE.
#include "nn/attention/softmax_attention.h"
#include "nn/gradcheck_cases.h"
#include "nn/gradcheck_module.h"

namespace linea::nn {

void add_attention_cases(std::vector<gradcheck::Case>& cases) {
  struct Row {
    const char* name;
    SoftmaxAttentionConfig config;
  };
  const Row rows[] = {
      {"SoftmaxAttention/full", {.d_model = 8, .heads = 2}},
      {"SoftmaxAttention/grouped_query", {.d_model = 8, .heads = 4, .kv_heads = 2, .head_dim = 2}},
      {"SoftmaxAttention/multi_query_window", {.d_model = 8, .heads = 2, .kv_heads = 1, .window = 2}},
      {"SoftmaxAttention/no_rope", {.d_model = 6, .heads = 3, .rope = false}},
  };
  for (const Row& row : rows)
    cases.push_back(module_case(
        row.name, [config = row.config](Generator& gen) { return std::make_shared<SoftmaxAttention>(config, gen); },
        inputs_of({{2, 5, row.config.d_model}}), [](SoftmaxAttention& m, const std::vector<Tensor>& x) { return m.forward(x[0]); }));
}

}  // namespace linea::nn
