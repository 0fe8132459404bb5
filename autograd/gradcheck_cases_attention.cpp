// Rows for the fused attention op: full causal, grouped-query and multi-query heads, sliding
// windows, fewer queries than keys (the last positions, as when decoding from a KV cache), a
// custom scale, strided q/k/v views and empty inputs; and the fused rotary embedding that
// positions q and k.
#include <cmath>

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

void add_rotary_cases(Table& table) {
  // Tables of angles p * theta_i for positions p = offset.. of dim -2 (constants of f).
  auto tables = [](int64_t length, int64_t half, int64_t offset) {
    std::vector<double> c, s;
    for (int64_t p = offset; p < offset + length; ++p)
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(p) * std::pow(100.0, -static_cast<double>(i) / half);
        c.push_back(std::cos(angle));
        s.push_back(std::sin(angle));
      }
    return std::pair{from_vector(c, {length, half}), from_vector(s, {length, half})};
  };
  struct Row {
    std::string name;
    Shape x;
    int64_t half, offset = 0;
    Unary view = identity;
  };
  const std::vector<Row> rows = {
      {"full", {2, 5, 4}, 2},
      {"partial", {3, 6}, 2, 7},  // 4 of 6 dims rotate, 2 pass through
      {"one_position", {2, 1, 8}, 4, 100},
      // (B, T, H, dh) leaves seen as (B, H, T, dh): the attention layer's layout
      {"heads_last", {2, 4, 3, 6}, 3, 0, [](const Tensor& x) { return transpose(x, 1, 2); }},
      {"zero_rows", {0, 3, 4}, 2},
  };
  for (const Row& r : rows) {
    const Shape seen = r.view(zeros(r.x)).shape();
    const auto [c, s] = tables(seen[seen.size() - 2], r.half, r.offset);
    add_single(table, "rotary_embedding/" + r.name, r.x,
               [r, c, s](const Tensor& x) { return rotary_embedding(r.view(x), c, s); });
  }
}

}  // namespace linea::gradcheck::cases
