// Rows for the fused attention op: full causal, grouped-query and multi-query heads, sliding
// windows, fewer queries than keys (the last positions, as when decoding from a KV cache), a
// custom scale, strided q/k/v views and empty inputs.
#include "autograd/gradcheck_cases_build.h"

namespace linea::gradcheck::cases {

void add_attention_cases(Table& table) {
  struct Row {
    std::string name;
    Shape q, kv;  // (B, H, Tq, dh) and (B, KV, Tk, dh), unless `heads_last` (below)
    int64_t window = 0;
    std::optional<double> scale = {};
    // Leaves laid out as (B, T, heads, dh) and transposed to (B, heads, T, dh) inside f: the layout
    // the attention layer hands over after splitting its projections into heads.
    bool heads_last = false;
  };
  const std::vector<Row> rows = {
      {"causal", {1, 2, 5, 3}, {1, 2, 5, 3}},
      {"batched", {2, 1, 4, 4}, {2, 1, 4, 4}},
      {"grouped_query", {1, 4, 4, 3}, {1, 2, 4, 3}},
      {"multi_query", {2, 3, 3, 2}, {2, 1, 3, 2}},
      {"window", {1, 2, 6, 3}, {1, 2, 6, 3}, 2},
      {"window_one", {1, 1, 4, 3}, {1, 1, 4, 3}, 1},
      {"window_wider_than_sequence", {1, 1, 4, 3}, {1, 1, 4, 3}, 9},
      {"fewer_queries", {1, 2, 2, 3}, {1, 2, 5, 3}},
      {"fewer_queries_window", {1, 2, 3, 3}, {1, 1, 6, 3}, 3},
      {"decode_one_query", {2, 2, 1, 3}, {2, 1, 5, 3}},
      {"custom_scale", {1, 2, 4, 3}, {1, 2, 4, 3}, 0, 0.9},
      {"heads_last_layout", {2, 4, 4, 3}, {2, 4, 2, 3}, 0, {}, true},
      {"zero_batch", {0, 2, 3, 2}, {0, 1, 3, 2}},
      {"zero_positions", {1, 2, 0, 2}, {1, 2, 0, 2}},
  };
  for (const Row& r : rows) {
    add(table, "scaled_dot_product_attention/" + r.name, inputs({r.q, r.kv, r.kv}), [r](const std::vector<Tensor>& x) {
      auto heads = [&](const Tensor& t) { return r.heads_last ? transpose(t, 1, 2) : t; };
      return scaled_dot_product_attention(heads(x[0]), heads(x[1]), heads(x[2]), r.window, r.scale);
    });
  }
}

}  // namespace linea::gradcheck::cases
