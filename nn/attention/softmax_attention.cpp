#include "nn/attention/softmax_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace linea::nn {

namespace {

// The keys and values of the positions seen: the last n <= W of them with a window, all of them
// without. In a batch stacked from sequences of different lengths (stack_states), the rows sit
// right-aligned: row b's keys are the last min(positions[b], n) of the n columns, and the columns
// before them are padding that its queries never see. New tokens are appended to every row alike.
struct KVCache : DecodeState {
  Tensor k, v;                     // (B, KV, n, dh)
  std::vector<int64_t> positions;  // tokens seen by each row; empty when every row has seen `position`
  std::vector<std::pair<std::string, Tensor*>> members() override { return {{"k", &k}, {"v", &v}}; }
};

// Keeps the last `window` positions of the cache (all of them for window 0).
void keep_window(KVCache& cache, int64_t window) {
  if (window == 0 || cache.k.size(2) <= window) return;
  const int64_t drop = cache.k.size(2) - window;
  cache.k = narrow(cache.k, 2, drop, window);
  cache.v = narrow(cache.v, 2, drop, window);
}

// Which of the n cache columns each row of a right-aligned cache sees: column j for row b when
// j >= n - min(positions[b], n). (B, 1, 1, 1, n) Bool, broadcast over (B, KV, G, Tq = 1, n).
Tensor visible_columns(const std::vector<int64_t>& positions, int64_t n, Device device) {
  const auto batch = static_cast<int64_t>(positions.size());
  std::vector<double> first(positions.size());
  for (size_t b = 0; b < positions.size(); ++b) first[b] = static_cast<double>(n - std::min(positions[b], n));
  const Tensor columns = reshape(arange(0, n, 1, {kFloat64}), {1, n});
  return to(reshape(ge(columns, from_vector(first, {batch, 1})), {batch, 1, 1, 1, n}), device);
}

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

std::unique_ptr<DecodeState> SoftmaxAttention::init_state(int64_t batch) const {
  LINEA_CHECK(batch >= 0, "SoftmaxAttention", "batch must be non-negative, got ", batch);
  auto cache = std::make_unique<KVCache>();
  const Tensor& w = q_proj->weight;
  cache->k = zeros({batch, config_.kv_heads, 0, config_.head_dim}, {w.dtype(), w.device()});
  cache->v = cache->k;
  return cache;
}

Tensor SoftmaxAttention::step(const Tensor& x, DecodeState& state) {
  KVCache* cache = &step_state<KVCache>(x, state, config_.d_model, "SoftmaxAttention", &KVCache::k);
  const bool ragged = !cache->positions.empty();
  const Tensor x3 = unsqueeze(x, 1);  // (B, 1, D)
  // Rotated at the new token's position: one for every row, or in a ragged batch each row's own.
  auto rotated = [&](const Linear& proj, int64_t heads) {
    const Tensor h = project_heads(proj, x3, heads, cache->position, /*rotate=*/!ragged);
    return ragged && rope_ ? rope_->step_rows(h, cache->positions) : h;
  };
  const Tensor q = rotated(*q_proj, config_.heads), k = rotated(*k_proj, config_.kv_heads);
  const Tensor v = project_heads(*v_proj, x3, config_.kv_heads, 0, false);
  cache->k = cat({cache->k, k}, 2);
  cache->v = cat({cache->v, v}, 2);
  keep_window(*cache, config_.window);
  ++cache->position;
  if (!ragged)  // every cached position is visible to the newest token (the window bounds the cache)
    return squeeze(o_proj->forward(attend(q, cache->k, cache->v)), 1);
  for (int64_t& p : cache->positions) ++p;
  const Tensor visible = visible_columns(cache->positions, cache->k.size(2), x.device());
  return squeeze(o_proj->forward(attend_composite(q, cache->k, cache->v, visible)), 1);
}

Tensor SoftmaxAttention::prefill(const Tensor& x, DecodeState& state) {
  KVCache* cache = &prefill_state<KVCache>(x, state, config_.d_model, "SoftmaxAttention", &KVCache::k);
  LINEA_CHECK(cache->positions.empty(), "SoftmaxAttention",
              "prefill continues a state whose rows have all seen the same number of tokens; this one was stacked "
              "from sequences of different lengths (prefill each alone, then stack)");
  const int64_t position = cache->position;
  const Tensor q = project_heads(*q_proj, x, config_.heads, position, true);
  cache->k = cat({cache->k, project_heads(*k_proj, x, config_.kv_heads, position, true)}, 2);
  cache->v = cat({cache->v, project_heads(*v_proj, x, config_.kv_heads, position, false)}, 2);
  // The queries are the last T of the cached positions, as attend() expects; the window's trim
  // comes after, since the prompt's first queries still see keys the trim drops.
  const Tensor out = o_proj->forward(attend(q, cache->k, cache->v));
  keep_window(*cache, config_.window);
  cache->position += x.size(1);
  own_storage(*cache);
  return out;
}

// Each row's keys go to the right end of the stacked cache (see KVCache), zeros in front.
std::unique_ptr<DecodeState> SoftmaxAttention::stack_states(const std::vector<const DecodeState*>& rows) const {
  LINEA_CHECK(!rows.empty(), "stack_states", "needs at least one state");
  std::vector<const KVCache*> caches;
  int64_t columns = 0;
  for (const DecodeState* row : rows) {
    const auto* cache = dynamic_cast<const KVCache*>(row);
    LINEA_CHECK(cache != nullptr, "SoftmaxAttention", "stack_states needs states made by this layer's init_state");
    caches.push_back(cache);
    columns = std::max(columns, cache->k.size(2));
  }
  auto out = std::make_unique<KVCache>();
  std::vector<Tensor> ks, vs;
  for (const KVCache* cache : caches) {
    const int64_t pad = columns - cache->k.size(2);
    auto padded = [&](const Tensor& t) {
      if (pad == 0) return t;
      return cat({zeros({t.size(0), t.size(1), pad, t.size(3)}, {t.dtype(), t.device()}), t}, 2);
    };
    ks.push_back(padded(cache->k));
    vs.push_back(padded(cache->v));
    for (int64_t b = 0; b < cache->k.size(0); ++b)
      out->positions.push_back(cache->positions.empty() ? cache->position : cache->positions[static_cast<size_t>(b)]);
  }
  out->k = cat(ks, 0);
  out->v = cat(vs, 0);
  for (int64_t p : out->positions) out->position = std::max(out->position, p);
  const bool uniform = std::all_of(out->positions.begin(), out->positions.end(),
                                   [&](int64_t p) { return p == out->position; });
  if (uniform) out->positions.clear();
  return out;
}

}  // namespace linea::nn
