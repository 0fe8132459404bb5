// Softmax attention: decoding from the KV cache equals the full forward; grouped-query and
// windowed variants against a direct per-head reference; causality; the fused-kernel path agrees
// with the composite one.
#include <cmath>

#include "nn/attention/softmax_attention.h"
#include "tests/nn/mixer_forms.h"
#include "tests/test_util.h"

namespace linea::nn {
namespace {

using linea::testing::all_close;
using linea::testing::decode_all;

SoftmaxAttentionConfig small_config(int64_t kv_heads, int64_t window, bool rope) {
  return {.d_model = 12, .heads = 4, .kv_heads = kv_heads, .head_dim = 6, .rope = rope, .window = window};
}

// Direct reference: per query head, scores over allowed positions, with K/V head h / group.
Tensor reference_attention(SoftmaxAttention& layer, const Tensor& x) {
  const auto& c = layer.config();
  const int64_t batch = x.size(0), time = x.size(1), group = c.heads / c.kv_heads;
  auto heads_of = [&](const Linear& proj, int64_t n) {
    return transpose(reshape(proj.forward(x), {batch, time, n, c.head_dim}), 1, 2);
  };
  Tensor q = heads_of(*layer.q_proj, c.heads), k = heads_of(*layer.k_proj, c.kv_heads), v = heads_of(*layer.v_proj, c.kv_heads);
  if (c.rope) {
    RoPE rope(c.head_dim, {.base = c.rope_base});
    q = rope.forward(q);
    k = rope.forward(k);
  }
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < c.heads; ++h) {
    const Tensor qh = select(q, 1, h), kh = select(k, 1, h / group), vh = select(v, 1, h / group);
    Tensor scores = matmul(qh, transpose(kh, 1, 2)) / std::sqrt(static_cast<double>(c.head_dim));
    std::vector<bool> allowed(time * time);
    for (int64_t t = 0; t < time; ++t)
      for (int64_t s = 0; s < time; ++s) allowed[t * time + s] = s <= t && (c.window == 0 || s > t - c.window);
    scores = masked_fill(scores, logical_not(from_vector(allowed, {time, time})), -INFINITY);
    heads.push_back(matmul(softmax(scores, -1), vh));  // (B, T, dh)
  }
  return layer.o_proj->forward(cat(heads, -1));
}

struct Variant {
  int64_t kv_heads, window;
  bool rope;
};

class SoftmaxAttentionVariants : public ::testing::TestWithParam<Variant> {};

TEST_P(SoftmaxAttentionVariants, ForwardMatchesReferenceAndDecoding) {
  const Variant p = GetParam();
  Generator gen(7);
  SoftmaxAttention layer(small_config(p.kv_heads, p.window, p.rope), gen);
  layer.to(kFloat64);
  const Tensor x = randn({2, 9, 12}, kFloat64, &gen);
  const Tensor full = layer.forward(x);
  EXPECT_TRUE(all_close(full, reference_attention(layer, x), 1e-10, 1e-12));
  EXPECT_TRUE(all_close(decode_all(layer, x), full, 1e-10, 1e-12));
}

TEST_P(SoftmaxAttentionVariants, DecodingGradientsMatchForward) {
  const Variant p = GetParam();
  Generator gen(8);
  SoftmaxAttention layer(small_config(p.kv_heads, p.window, p.rope), gen);
  layer.to(kFloat64);
  const Tensor x = randn({2, 7, 12}, kFloat64, &gen).requires_grad_();
  const Tensor u = randn({2, 7, 12}, kFloat64, &gen);
  std::vector<Tensor> inputs = layer.parameters();
  inputs.push_back(x);
  const auto g_full = grad(sum(layer.forward(x) * u), inputs);
  const auto g_step = grad(sum(decode_all(layer, x) * u), inputs);
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_TRUE(all_close(g_step[i], g_full[i], 1e-9, 1e-11)) << "input " << i;
}

// Decoding from the KV cache against the full forward, outputs and gradients, in both dtypes, with
// the largest differences printed for the record (as the recurrent layers print theirs).
TEST_P(SoftmaxAttentionVariants, KvCacheDecodingEqualsForwardInBothDtypes) {
  const Variant p = GetParam();
  for (const DType dtype : {kFloat64, kFloat32}) {
    Generator gen(10);
    SoftmaxAttention layer(small_config(p.kv_heads, p.window, p.rope), gen);
    layer.to(dtype);
    const testing::FormDiff d = testing::compare_forms(layer, randn({2, 13, 12}, dtype, &gen));
    const std::string what = "softmax kv_heads=" + std::to_string(p.kv_heads) + " window=" + std::to_string(p.window) +
                             (p.rope ? " rope" : "");
    testing::expect_forms_agree(d, dtype, what);
    testing::print_forms(what, dtype, d);
  }
}

TEST_P(SoftmaxAttentionVariants, IsCausal) {
  const Variant p = GetParam();
  Generator gen(9);
  SoftmaxAttention layer(small_config(p.kv_heads, p.window, p.rope), gen);
  layer.to(kFloat64);
  const Tensor x = randn({1, 8, 12}, kFloat64, &gen);
  Tensor changed = clone(x);
  {
    NoGradGuard no_grad;
    Tensor tail = narrow(changed, 1, 5, 3);
    copy_(tail, randn({1, 3, 12}, kFloat64, &gen));
  }
  EXPECT_EQ(max_abs_diff(narrow(layer.forward(x), 1, 0, 5), narrow(layer.forward(changed), 1, 0, 5)), 0.0);
}

// The same layer through the fused kernel (config.fused) and the composite path: outputs, decoding
// and the gradients of every parameter and of x agree to rounding in float64.
TEST_P(SoftmaxAttentionVariants, FusedMatchesComposite) {
  const Variant p = GetParam();
  SoftmaxAttentionConfig config = small_config(p.kv_heads, p.window, p.rope);
  Generator gen_a(10), gen_b(10);
  SoftmaxAttention composite(config, gen_a);
  config.fused = true;
  SoftmaxAttention fused(config, gen_b);
  composite.to(kFloat64);
  fused.to(kFloat64);
  Generator gen(11);
  const Tensor x = randn({2, 9, 12}, kFloat64, &gen).requires_grad_();
  const Tensor u = randn({2, 9, 12}, kFloat64, &gen);
  const Tensor y_fused = fused.forward(x), y_composite = composite.forward(x);
  EXPECT_TRUE(all_close(y_fused, y_composite, 1e-11, 1e-13));
  EXPECT_TRUE(all_close(decode_all(fused, x), y_composite, 1e-11, 1e-13));
  std::vector<Tensor> in_fused = fused.parameters(), in_composite = composite.parameters();
  in_fused.push_back(x);
  in_composite.push_back(x);
  const auto g_fused = grad(sum(y_fused * u), in_fused), g_composite = grad(sum(y_composite * u), in_composite);
  for (size_t i = 0; i < g_fused.size(); ++i)
    EXPECT_TRUE(all_close(g_fused[i], g_composite[i], 1e-10, 1e-12)) << "input " << i;
}

INSTANTIATE_TEST_SUITE_P(All, SoftmaxAttentionVariants,
                         ::testing::Values(Variant{4, 0, true}, Variant{4, 0, false}, Variant{2, 0, true},
                                           Variant{1, 0, true}, Variant{4, 3, true}, Variant{1, 2, false}));

TEST(SoftmaxAttention, WindowedCacheStaysBounded) {
  Generator gen(3);
  SoftmaxAttention layer(small_config(2, 3, true), gen);
  auto state = layer.init_state(1);
  for (int t = 0; t < 10; ++t) layer.step(randn({1, 12}, kFloat32, &gen), *state);
  EXPECT_EQ(state->position, 10);
}

TEST(SoftmaxAttention, RejectsBadConfigAndInput) {
  Generator gen(1);
  EXPECT_LINEA_ERROR(SoftmaxAttention({.d_model = 12, .heads = 4, .kv_heads = 3}, gen), "kv_heads");
  EXPECT_LINEA_ERROR(SoftmaxAttention({.d_model = 10, .heads = 4}, gen), "divisible");
  SoftmaxAttention layer({.d_model = 8, .heads = 2}, gen);
  EXPECT_LINEA_ERROR(layer.forward(randn({2, 3, 7})), "SoftmaxAttention", "float32[2, 3, 7]");
}

}  // namespace
}  // namespace linea::nn
