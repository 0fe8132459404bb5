// The fused attention op against the composite it replaces (matmul, masked_fill, softmax, matmul,
// with K/V heads repeated by index_select): values and the gradients of q, k and v, in float64
// (to rounding) and float32, over grouped-query heads, windows, fewer queries than keys and
// strided inputs; and its input checks.
#include <cmath>
#include <limits>

#include "autograd/ops.h"
#include "tests/test_util.h"

namespace linea {
namespace {

using testing::all_close;

// The composite formula: every (query, key) score formed, the invisible ones masked to -inf.
Tensor composite_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window,
                           std::optional<double> scale = {}) {
  const int64_t heads = q.size(1), tq = q.size(2), dh = q.size(3), kv = k.size(1), tk = k.size(2);
  std::vector<int64_t> head_of(heads);
  for (int64_t h = 0; h < heads; ++h) head_of[h] = h / (heads / kv);
  const Tensor index = from_vector(head_of, {heads}, q.device());
  const Tensor k_rep = index_select(k, 1, index), v_rep = index_select(v, 1, index);
  std::vector<bool> allowed(tq * tk);
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t s = 0; s < tk; ++s) {
      const int64_t position = tk - tq + i;
      allowed[i * tk + s] = s <= position && (window == 0 || s > position - window);
    }
  const double sc = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(dh));
  Tensor scores = matmul(q, transpose(k_rep, -1, -2)) * sc;
  scores = masked_fill(scores, logical_not(from_vector(allowed, {tq, tk}, q.device())),
                       -std::numeric_limits<double>::infinity());
  return matmul(softmax(scores, -1), v_rep);
}

// q (B, H, Tq, dh) attending to k and v (B, KV, Tk, dh). A case names each dim once, so q and kv
// share B and dh by construction.
struct Case {
  std::string name;
  int64_t batch, heads, kv_heads, queries, keys, head_dim;
  int64_t window = 0;
  std::optional<double> scale = {};

  Shape q() const { return {batch, heads, queries, head_dim}; }
  Shape kv() const { return {batch, kv_heads, keys, head_dim}; }
};

const Case kCases[] = {
    // name                         B  H  KV  Tq  Tk  dh  window  scale
    {"causal",                      2, 3, 3,  7,  7,  5},
    {"grouped_query",               2, 6, 2,  9,  9,  4},
    {"multi_query",                 1, 4, 1,  8,  8,  8},
    {"window",                      2, 2, 2,  11, 11, 3,  4},
    {"window_one",                  1, 2, 2,  5,  5,  3,  1},
    {"window_longer_than_sequence", 1, 2, 1,  5,  5,  3,  50},
    {"fewer_queries",               2, 4, 2,  3,  10, 6},
    {"fewer_queries_window",        2, 4, 4,  4,  13, 6,  5},
    {"decode_one_query",            3, 4, 2,  1,  12, 8},
    {"decode_one_query_window",     3, 4, 2,  1,  12, 8,  3},
    {"custom_scale",                1, 2, 2,  6,  6,  4,  0,      0.37},
    {"long_threaded",               2, 4, 2,  70, 70, 16, 23},
};

// Leaves drawn from a seeded generator, requiring grad.
std::vector<Tensor> draw(const Case& c, DType dtype, uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> xs;
  for (const Shape& s : {c.q(), c.kv(), c.kv()}) xs.push_back(randn(s, dtype, &gen).requires_grad_());
  return xs;
}

void expect_matches_composite(const Case& c, DType dtype, double rtol, double atol) {
  SCOPED_TRACE(c.name + " " + dtype_name(dtype));
  const std::vector<Tensor> xs = draw(c, dtype, 5);
  const Tensor fused = scaled_dot_product_attention(xs[0], xs[1], xs[2], c.window, c.scale);
  const Tensor ref = composite_attention(xs[0], xs[1], xs[2], c.window, c.scale);
  ASSERT_EQ(fused.shape(), c.q());
  EXPECT_TRUE(all_close(fused, ref, rtol, atol));
  Generator gen(17);
  const Tensor u = randn(fused.shape(), dtype, &gen);
  const auto g = grad(fused, xs, u, false, true), g_ref = grad(ref, xs, u, false, true);
  const char* names[] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(all_close(g[i], g_ref[i], rtol, atol)) << names[i];
}

TEST(AttentionOp, MatchesCompositeInFloat64) {
  for (const Case& c : kCases) expect_matches_composite(c, kFloat64, 1e-11, 1e-12);
}

TEST(AttentionOp, MatchesCompositeInFloat32) {
  for (const Case& c : kCases) expect_matches_composite(c, kFloat32, 1e-4, 1e-5);
}

// The layer hands over q, k, v as transposed views of its projections: (B, T, heads, dh) -> (B, heads, T, dh).
TEST(AttentionOp, StridedInputs) {
  Generator gen(2);
  std::vector<Tensor> xs = {randn({2, 7, 4, 5}, kFloat64, &gen).requires_grad_(),
                            randn({2, 7, 2, 5}, kFloat64, &gen).requires_grad_(),
                            randn({2, 7, 2, 5}, kFloat64, &gen).requires_grad_()};
  auto heads = [](const Tensor& t) { return transpose(t, 1, 2); };
  const Tensor fused = scaled_dot_product_attention(heads(xs[0]), heads(xs[1]), heads(xs[2]), 3);
  const Tensor ref = composite_attention(heads(xs[0]), heads(xs[1]), heads(xs[2]), 3);
  EXPECT_TRUE(all_close(fused, ref, 1e-11, 1e-12));
  const Tensor u = randn(fused.shape(), kFloat64, &gen);
  const auto g = grad(fused, xs, u), g_ref = grad(ref, xs, u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(all_close(g[i], g_ref[i], 1e-11, 1e-12)) << "input " << i;
}

// The layer hands over (B, T, H, dh) projections seen as (B, H, T, dh): the output comes back in
// q's memory order and the gradients in their inputs' orders, so transposing back and merging the
// heads are views, not copies.
TEST(AttentionOp, OutputsKeepTheInputsMemoryOrder) {
  Generator gen(3);
  std::vector<Tensor> leaves = {randn({2, 6, 4, 3}, kFloat64, &gen).requires_grad_(),
                                randn({2, 6, 2, 3}, kFloat64, &gen).requires_grad_(),
                                randn({2, 6, 2, 3}, kFloat64, &gen).requires_grad_()};
  std::vector<Tensor> seen;
  for (const Tensor& x : leaves) seen.push_back(transpose(x, 1, 2));
  const Tensor out = scaled_dot_product_attention(seen[0], seen[1], seen[2]);
  EXPECT_EQ(out.strides(), seen[0].strides());
  EXPECT_TRUE(transpose(out, 1, 2).is_contiguous());
  const auto g = grad(out, seen, randn(out.shape(), kFloat64, &gen));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(g[i].strides(), seen[i].strides()) << "input " << i;
  // Contiguous inputs keep contiguous results.
  const Tensor q = randn({1, 2, 5, 3}, kFloat64, &gen);
  EXPECT_TRUE(scaled_dot_product_attention(q, q, q).is_contiguous());
}

// Decoding: the last query of a full forward equals one query over the same keys.
TEST(AttentionOp, LastQueryEqualsDecodingStep) {
  Generator gen(4);
  const Tensor q = randn({2, 4, 9, 8}, kFloat64, &gen), k = randn({2, 2, 9, 8}, kFloat64, &gen),
               v = randn({2, 2, 9, 8}, kFloat64, &gen);
  for (int64_t window : {0, 4}) {
    const Tensor full = scaled_dot_product_attention(q, k, v, window);
    const Tensor last = scaled_dot_product_attention(narrow(q, 2, 8, 1), k, v, window);
    EXPECT_TRUE(all_close(last, narrow(full, 2, 8, 1), 1e-13, 1e-14)) << "window " << window;
  }
}

TEST(AttentionOp, EmptyInputs) {
  for (const auto& [q_shape, kv_shape] : std::vector<std::pair<Shape, Shape>>{
           {{0, 2, 3, 4}, {0, 1, 3, 4}}, {{1, 2, 0, 4}, {1, 2, 0, 4}}, {{1, 2, 0, 4}, {1, 1, 5, 4}}}) {
    Tensor q = zeros(q_shape, kFloat64).requires_grad_(), k = ones(kv_shape, kFloat64).requires_grad_(),
           v = ones(kv_shape, kFloat64).requires_grad_();
    const Tensor out = scaled_dot_product_attention(q, k, v);
    EXPECT_EQ(out.shape(), q_shape);
    const auto g = grad(sum(out), {q, k, v});
    EXPECT_EQ(g[1].shape(), kv_shape);
    EXPECT_EQ(max_abs_diff(g[1], zeros(kv_shape, kFloat64)), 0.0);
  }
}

TEST(AttentionOp, RejectsBadInputs) {
  const Tensor q = randn({1, 4, 3, 8}), k = randn({1, 2, 5, 8});
  EXPECT_LINEA_ERROR(scaled_dot_product_attention(q, randn({1, 3, 5, 8}), randn({1, 3, 5, 8})),
                     "scaled_dot_product_attention", "3 K/V heads must divide the 4 query heads");
  EXPECT_LINEA_ERROR(scaled_dot_product_attention(randn({1, 4, 6, 8}), k, k), "Tq <= Tk");
  EXPECT_LINEA_ERROR(scaled_dot_product_attention(q, randn({1, 2, 5, 4}), randn({1, 2, 5, 4})), "head dim");
  EXPECT_LINEA_ERROR(scaled_dot_product_attention(q, k, randn({1, 2, 4, 8})), "one shape");
  EXPECT_LINEA_ERROR(scaled_dot_product_attention(q, k, to(k, kFloat64)), "scaled_dot_product_attention", "float64");
  EXPECT_LINEA_ERROR(scaled_dot_product_attention(randn({4, 3, 8}), k, k), "(B, H, Tq, dh)");
  EXPECT_LINEA_ERROR(scaled_dot_product_attention(q, k, k, -1), "window");
  EXPECT_LINEA_ERROR(scaled_dot_product_attention(q, k, k, 0, std::numeric_limits<double>::infinity()), "scale");
}

}  // namespace
}  // namespace linea
