#include "nn/attention/softmax_attention.h"

#include <cmath>
#include <limits>

namespace linea::nn {

namespace {

struct KVCache : DecodeState {
  Tensor k, v;  // (B, KV, n, dh): the last n <= W positions (all of them without a window)
};

// Which key positions each query may see: s <= t, and s > t - window when windowed. Query rows
// are positions [q_start, q_start + Tq), key columns [k_start, k_start + Tk).
Tensor allowed_positions(int64_t tq, int64_t q_start, int64_t tk, int64_t k_start, int64_t window, Device device) {
  const Tensor t = reshape(arange(q_start, q_start + tq, 1, {kFloat64}), {tq, 1});
  const Tensor s = reshape(arange(k_start, k_start + tk, 1, {kFloat64}), {1, tk});
  Tensor allowed = le(s, t);
  if (window > 0) allowed = logical_and(allowed, gt(s, t - static_cast<double>(window)));
  return to(allowed, device);
}

}  // namespace

SoftmaxAttention::SoftmaxAttention(const SoftmaxAttentionConfig& config, Generator& gen) : config_(config) {
  SoftmaxAttentionConfig& c = config_;
  LINEA_CHECK(c.d_model > 0 && c.heads > 0, "SoftmaxAttention", "needs d_model > 0 and heads > 0, got ", c.d_model,
              " and ", c.heads);
  if (c.kv_heads == 0) c.kv_heads = c.heads;
  if (c.head_dim == 0) {
    LINEA_CHECK(c.d_model % c.heads == 0, "SoftmaxAttention", "d_model ", c.d_model, " is not divisible by ", c.heads,
                " heads (or set head_dim)");
    c.head_dim = c.d_model / c.heads;
  }
  LINEA_CHECK(c.kv_heads > 0 && c.heads % c.kv_heads == 0, "SoftmaxAttention", "kv_heads ", c.kv_heads,
              " must divide heads ", c.heads);
  LINEA_CHECK(c.window >= 0, "SoftmaxAttention", "window must be >= 0, got ", c.window);
  const LinearOptions options{.bias = c.bias};
  q_proj = register_module("q_proj", std::make_shared<Linear>(c.d_model, c.heads * c.head_dim, gen, options));
  k_proj = register_module("k_proj", std::make_shared<Linear>(c.d_model, c.kv_heads * c.head_dim, gen, options));
  v_proj = register_module("v_proj", std::make_shared<Linear>(c.d_model, c.kv_heads * c.head_dim, gen, options));
  o_proj = register_module("o_proj", std::make_shared<Linear>(c.heads * c.head_dim, c.d_model, gen, options));
  if (c.rope) rope_ = register_module("rope", std::make_shared<RoPE>(c.head_dim, RoPEOptions{.base = c.rope_base, .rotary_dim = c.rotary_dim}));
}

Tensor SoftmaxAttention::project_heads(const Linear& proj, const Tensor& x, int64_t heads, int64_t offset,
                                       bool rotate) const {
  const int64_t batch = x.size(0), time = x.size(1);
  Tensor h = transpose(reshape(proj.forward(x), {batch, time, heads, config_.head_dim}), 1, 2);
  return rotate && rope_ ? rope_->forward(h, offset) : h;
}

Tensor SoftmaxAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v) const {
  const int64_t batch = q.size(0), tq = q.size(2), tk = k.size(2);
  if (config_.fused || q.device().is_cuda()) {
    const Tensor out = scaled_dot_product_attention(q, k, v, config_.window);  // (B, H, Tq, dh)
    return reshape(transpose(out, 1, 2), {batch, tq, config_.heads * config_.head_dim});
  }
  // With one query (decoding) every key kept in the cache is visible: no mask needed.
  const Tensor allowed = tq == 1 ? Tensor() : allowed_positions(tq, tk - tq, tk, 0, config_.window, q.device());
  return attend_composite(q, k, v, allowed);
}

Tensor SoftmaxAttention::attend_composite(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const Tensor& allowed) const {
  const int64_t batch = q.size(0), tq = q.size(2), tk = k.size(2), dh = config_.head_dim;
  const int64_t kv = config_.kv_heads, group = config_.heads / kv;
  // Query heads h = j * group + g share K/V head j: view q as (B, KV, G*Tq, dh).
  const Tensor qg = reshape(q, {batch, kv, group * tq, dh});
  Tensor scores = matmul(qg, transpose(k, -1, -2)) * (1.0 / std::sqrt(static_cast<double>(dh)));
  if (allowed.defined()) {
    scores = reshape(scores, {batch, kv, group, tq, tk});
    scores = masked_fill(scores, logical_not(allowed), -std::numeric_limits<double>::infinity());
    scores = reshape(scores, {batch, kv, group * tq, tk});
  }
  const Tensor out = matmul(softmax(scores, -1), v);  // (B, KV, G*Tq, dh)
  // Back to (B, Tq, H*dh): heads in order j * group + g.
  return reshape(transpose(reshape(out, {batch, config_.heads, tq, dh}), 1, 2), {batch, tq, config_.heads * dh});
}

Tensor SoftmaxAttention::forward(const Tensor& x) {
  check_sequence_input(x, config_.d_model, "SoftmaxAttention");
  const Tensor q = project_heads(*q_proj, x, config_.heads, 0, true);
  const Tensor k = project_heads(*k_proj, x, config_.kv_heads, 0, true);
  const Tensor v = project_heads(*v_proj, x, config_.kv_heads, 0, false);
  return o_proj->forward(attend(q, k, v));
}

std::unique_ptr<DecodeState> SoftmaxAttention::init_state(int64_t) const { return std::make_unique<KVCache>(); }

Tensor SoftmaxAttention::step(const Tensor& x, DecodeState& state) {
  KVCache* cache = &step_state<KVCache>(x, state, config_.d_model, "SoftmaxAttention");
  const int64_t position = cache->position;
  const Tensor x3 = unsqueeze(x, 1);  // (B, 1, D)
  const Tensor q = project_heads(*q_proj, x3, config_.heads, position, true);
  const Tensor k = project_heads(*k_proj, x3, config_.kv_heads, position, true);
  const Tensor v = project_heads(*v_proj, x3, config_.kv_heads, position, false);
  cache->k = cache->k.defined() ? cat({cache->k, k}, 2) : k;
  cache->v = cache->v.defined() ? cat({cache->v, v}, 2) : v;
  if (config_.window > 0 && cache->k.size(2) > config_.window) {  // keep only what the window sees
    const int64_t drop = cache->k.size(2) - config_.window;
    cache->k = narrow(cache->k, 2, drop, config_.window);
    cache->v = narrow(cache->v, 2, drop, config_.window);
  }
  ++cache->position;
  // Every cached position is visible to the newest token (the window bounds the cache).
  return squeeze(o_proj->forward(attend(q, cache->k, cache->v)), 1);
}

}  // namespace linea::nn
