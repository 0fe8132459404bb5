#include "nn/attention/softmax_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "nn/layers/check.h"
#include "nn/layers/fused_product.h"
#include "nn/precision.h"

namespace linea::nn {

namespace {

// The keys and values of the positions seen, in a buffer of C columns: row b's key of position p
// sits in column p mod C. Without a window C grows (capacity_for) to hold every position; with a
// window W it stops at W, a ring of the last W positions. reserve() sizes it once for a known
// number of tokens; after that it never moves (a CUDA graph can replay the step) and a step past
// that number is an error. Columns not yet written hold zeros, so two caches that saw the same
// tokens hold the same values. The step's kernel (cached_attention_step) writes the new column
// and advances `seen` on the device: the host decides nothing per token but whether to grow.
// A prefill into an empty cache of as many columns as the prompt has tokens keeps the prompt's
// keys and values as the projections left them (maybe strided views of buffers of exactly their
// size), and leaves `seen` to the first step or reserve(), which lay the cache out for the step's
// kernel (lay_out_for_steps) as they had to anyway to make room: a prompt is not copied twice.
struct KVCache : DecodeState {
  Tensor k, v;               // (B, KV, C, dh); contiguous once a step or reserve() has run
  Tensor seen;               // (B) Int64, on the cache's device: tokens each row has seen (the
                             // device's copy of seen_by_row()), made by the first step or reserve()
  std::vector<int64_t> lag;  // position - seen, per row (rows stacked from shorter prompts lag); empty: none
  int64_t reserved = 0;      // tokens the cache was sized for (0: it grows as needed)
  Tensor cos, sin;           // the RoPE tables the last step read, kept alive for a captured graph
  std::vector<std::pair<std::string, Tensor*>> members() override {
    return {{"k", &k}, {"v", &v}};  // not `seen`: the host's position and lag say it
  }
  int64_t token_limit() const override { return reserved; }
  bool may_grow() const override { return reserved == 0; }
  int64_t capacity() const { return k.size(2); }
  std::vector<int64_t> seen_by_row() const {
    std::vector<int64_t> rows(static_cast<size_t>(k.size(0)), position);
    for (size_t b = 0; b < lag.size(); ++b) rows[b] -= lag[b];
    return rows;
  }
};

// Columns for `tokens` in a cache that grows: powers of two from 16 (so few regrowths in all),
// at most the window.
int64_t capacity_for(int64_t tokens, int64_t window) {
  int64_t c = 16;
  while (c < tokens) c *= 2;
  return window > 0 ? std::min(c, window) : c;
}

// The columns the cache needs for `tokens` in all: what it has when reserved (an error past the
// reserve), else enough to grow into.
int64_t columns_for(const KVCache& cache, int64_t tokens, int64_t window) {
  if (cache.reserved == 0) return std::max(cache.capacity(), capacity_for(tokens, window));
  LINEA_CHECK(tokens <= cache.reserved, "SoftmaxAttention", "the KV cache was reserved for ", cache.reserved,
              " tokens and token ", tokens, " does not fit; reserve more (generate: raise the maximum length)");
  return cache.capacity();
}

// The keys a buffer (B, KV, C, dh) holds for rows that have each seen `seen` tokens, in position
// order: the last min(seen, C) positions.
Tensor in_position_order(const Tensor& buffer, int64_t seen) {
  const int64_t c = buffer.size(2);
  if (seen <= c) return narrow(buffer, 2, 0, seen);
  const int64_t oldest = seen % c;  // the column of position seen - C
  return oldest == 0 ? buffer : cat({narrow(buffer, 2, oldest, c - oldest), narrow(buffer, 2, 0, oldest)}, 2);
}

// Keys (B, KV, n, dh) of the positions [end - n, end), in order, laid out in a fresh buffer of C
// columns: the last min(n, C) of them, position p in column p mod C, zeros where there is none
// (n < C: then the keys start at position 0, nothing has wrapped). Differentiable: a cat of the
// keys' pieces, or the keys themselves (a view, maybe strided) when they fill the columns in
// order.
Tensor ring_layout(const Tensor& keys, int64_t end, int64_t columns) {
  const int64_t n = std::min(keys.size(2), columns);
  const Tensor last = narrow(keys, 2, keys.size(2) - n, n);
  if (n < columns) {
    const Tensor pad = zeros({keys.size(0), keys.size(1), columns - n, keys.size(3)}, {keys.dtype(), keys.device()});
    return n == 0 ? pad : cat({last, pad}, 2);
  }
  const int64_t shift = end % columns;  // the column of the oldest position kept, end - C
  if (shift == 0) return last;
  return cat({narrow(last, 2, columns - shift, shift), narrow(last, 2, 0, columns - shift)}, 2);
}

// A buffer whose rows have seen `seen` tokens, laid out again in `columns` columns.
Tensor relaid(const Tensor& buffer, int64_t seen, int64_t columns) {
  return ring_layout(in_position_order(buffer, seen), seen, columns);
}

// The cache in buffers of `columns` columns. Only a cache whose ring has not wrapped is ever
// resized (it grows below the window, and reserve() keeps a full ring as it is): every row's
// keys sit at columns [0, seen), so rows that lag need nothing of their own.
void resize(KVCache& cache, int64_t columns) {
  LINEA_CHECK(cache.position <= std::min(cache.capacity(), columns), "SoftmaxAttention",
              "internal: resizing a KV cache of ", cache.capacity(), " columns that has seen ", cache.position,
              " tokens to ", columns);
  cache.k = contiguous(relaid(cache.k, cache.position, columns));
  cache.v = contiguous(relaid(cache.v, cache.position, columns));
}

// The cache in `columns` contiguous columns, which the step's kernel writes in place (a prefill
// may have left the prompt's keys as strided views, in as many columns as it had tokens), with
// `seen` on the device.
void lay_out_for_steps(KVCache& cache, int64_t columns) {
  if (columns != cache.capacity() || !cache.k.is_contiguous() || !cache.v.is_contiguous()) resize(cache, columns);
  if (!cache.seen.defined())
    cache.seen = to(from_vector<int64_t>(cache.seen_by_row(), {cache.k.size(0)}), cache.k.device());
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
  c.head_dim = resolved_head_dim(c.head_dim, c.d_model, c.heads, "SoftmaxAttention");
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
  return heads_of(proj.forward(x), heads, offset, rotate);
}

SoftmaxAttention::QKRows SoftmaxAttention::project_qk(const Tensor& x, int64_t queries) {
  const int64_t first_query = x.size(1) - queries;
  if (!rope_) return {q_proj->forward(narrow(x, 1, first_query, queries)), k_proj->forward(x)};
  // One product for both (nn/layers/stacked_projection.h): one launch instead of two, which a
  // short prompt, bound by the host's launches, gains from. q comes for every token; the last
  // `queries` are kept. Only with RoPE, which writes q and k anew, so that the cache keeps nothing
  // of the stacked product: v stays a product of its own, or the cache would hold a view of the
  // stack (or a copy of it, a launch back).
  const std::vector<Tensor> qk = qk_projections_.forward({{q_proj.get(), true}, {k_proj.get(), true}}, x);
  return {narrow(qk[0], 1, first_query, queries), qk[1]};
}

Tensor SoftmaxAttention::heads_of(const Tensor& y, int64_t heads, int64_t offset, bool rotate) const {
  Tensor h = transpose(reshape(y, {y.size(0), y.size(1), heads, config_.head_dim}), 1, 2);
  return rotate && rope_ ? rope_->forward(h, offset) : h;
}

Tensor SoftmaxAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v) const {
  const int64_t batch = q.size(0), tq = q.size(2), tk = k.size(2);
  if (config_.fused || q.device().is_cuda()) {
    const Tensor out = scaled_dot_product_attention(q, k, v, config_.window);  // (B, H, Tq, dh)
    return reshape(transpose(out, 1, 2), {batch, tq, config_.heads * config_.head_dim});
  }
  // One query that sees every key (decoding: the cache keeps no more than the window) needs no
  // mask; the last query of a prompt longer than the window does.
  const bool sees_all = tq == 1 && (config_.window == 0 || tk <= config_.window);
  const Tensor allowed = sees_all ? Tensor() : allowed_positions(tq, tk - tq, tk, 0, config_.window, q.device());
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
  // Three products, not one stacked product: measured on an H100 (docs/benchmarks.md, nineteenth
  // session), q, k and v stacked made the training step 2% faster but its peak memory 9% higher
  // (attention keeps v, a view that holds the whole stack), and q and k alone gained nothing.
  const Tensor q = project_heads(*q_proj, x, config_.heads, 0, true);
  const Tensor k = project_heads(*k_proj, x, config_.kv_heads, 0, true);
  const Tensor v = project_heads(*v_proj, x, config_.kv_heads, 0, false);
  return o_proj->forward(attend(q, k, v), stream_dtype(x));  // bfloat16 activations: float32 out
}

std::unique_ptr<DecodeState> SoftmaxAttention::init_state(int64_t batch) const {
  LINEA_CHECK(batch >= 0, "SoftmaxAttention", "batch must be non-negative, got ", batch);
  auto cache = std::make_unique<KVCache>();
  const Tensor& w = q_proj->weight;
  cache->k = zeros({batch, config_.kv_heads, 0, config_.head_dim}, {w.dtype(), w.device()});
  cache->v = cache->k;
  return cache;
}

Tensor SoftmaxAttention::step(const Tensor& x, DecodeState& state) { return decode(x, state, nullptr, Tensor()); }

Tensor SoftmaxAttention::residual_step(const Tensor& x, const Norm& norm, DecodeState& state) {
  if (is_grad_enabled()) return SequenceMixer::residual_step(x, norm, state);
  return decode(x, state, &norm, x);
}

Tensor SoftmaxAttention::decode(const Tensor& x, DecodeState& state, const Norm* input_norm, const Tensor& residual) {
  KVCache& cache = step_state<KVCache>(x, state, config_.d_model, "SoftmaxAttention", &KVCache::k);
  const int64_t tokens = cache.position + 1, batch = x.size(0), dh = config_.head_dim;
  lay_out_for_steps(cache, columns_for(cache, tokens, config_.window));
  // One product for q, k and v (separate ones under grad: nn/layers/stacked_projection.h); each
  // token's (heads * dh) columns are (heads, dh) as they are.
  const std::vector<Tensor> y =
      step_projections_.forward({{q_proj.get(), true}, {k_proj.get(), true}, {v_proj.get(), true}}, x, input_norm);
  const Tensor q = view(y[0], {batch, config_.heads, dh});
  const Tensor k = view(y[1], {batch, config_.kv_heads, dh}), v = view(y[2], {batch, config_.kv_heads, dh});
  Tensor out;
  if (is_grad_enabled()) {
    out = step_differentiable(q, k, v, cache);
  } else {
    if (rope_) std::tie(cache.cos, cache.sin) = rope_->tables(std::max(tokens, cache.reserved), x.dtype(), x.device());
    if (fuses_products(x) && !o_proj->lora) {
      // The output projection in the same op: on CUDA its kernel merges the attention's splits.
      Tensor y = cached_attention_projected(q, k, v, cache.seen, cache.cos, cache.sin, cache.k, cache.v,
                                            {.weight = o_proj->weight, .bias = o_proj->bias, .residual = residual});
      ++cache.position;
      return y;
    }
    out = cached_attention_step(q, k, v, cache.seen, cache.cos, cache.sin, cache.k, cache.v);
  }
  ++cache.position;
  return fused_product(*o_proj, reshape(out, {batch, config_.heads * dh}), {.residual = residual});
}

// What cached_attention_step does, in ops autograd records: the new column put in with `where`
// (the cache's buffers become new tensors), the columns not yet seen masked out.
Tensor SoftmaxAttention::step_differentiable(const Tensor& q, const Tensor& k, const Tensor& v, DecodeState& state) {
  auto& cache = dynamic_cast<KVCache&>(state);
  const std::vector<int64_t> seen = cache.seen_by_row();
  const int64_t batch = q.size(0), columns = cache.capacity();
  std::vector<double> newest(seen.size()), visible(seen.size());
  for (size_t b = 0; b < seen.size(); ++b) {
    newest[b] = static_cast<double>(seen[b] % columns);
    visible[b] = static_cast<double>(std::min(seen[b] + 1, columns));
  }
  const Device device = q.device();
  const Tensor column = linea::to(reshape(arange(0, columns, 1, {kFloat64}), {1, 1, columns, 1}), device);
  const Tensor is_new = eq(column, linea::to(from_vector(newest, {batch, 1, 1, 1}), device));  // (B, 1, C, 1)
  const Tensor seen_columns = linea::to(from_vector(visible, {batch, 1, 1, 1}), device);
  const Tensor allowed = reshape(lt(column, seen_columns), {batch, 1, 1, 1, columns});
  const Tensor q_at = rope_ ? rope_->step_rows(q, seen) : q, k_at = rope_ ? rope_->step_rows(k, seen) : k;
  cache.k = where(is_new, unsqueeze(k_at, 2), cache.k);
  cache.v = where(is_new, unsqueeze(v, 2), cache.v);
  std::vector<int64_t> advanced = seen;
  for (int64_t& s : advanced) ++s;
  cache.seen = linea::to(from_vector<int64_t>(advanced, {batch}), device);
  return attend_composite(unsqueeze(q_at, 2), cache.k, cache.v, allowed);  // (B, 1, H dh)
}

Tensor SoftmaxAttention::prefill_mixed(const Tensor& x, DecodeState& state, bool last_only) {
  // (An x that is not (B, T, D) gets 0 queries here and its error from prefill_queries' check.)
  const int64_t tokens = x.defined() && x.dim() == 3 ? x.size(1) : 0;
  return prefill_queries(x, state, last_only ? 1 : tokens);
}

Tensor SoftmaxAttention::prefill_queries(const Tensor& x, DecodeState& state, int64_t queries) {
  KVCache& cache = prefill_state<KVCache>(x, state, config_.d_model, "SoftmaxAttention", &KVCache::k);
  LINEA_CHECK(cache.lag.empty(), "SoftmaxAttention",
              "prefill continues a state whose rows have all seen the same number of tokens; this one was stacked "
              "from sequences of different lengths (prefill each alone, then stack)");
  const int64_t position = cache.position, tokens = position + x.size(1);
  const int64_t columns = columns_for(cache, tokens, config_.window);
  const int64_t first_query = x.size(1) - queries;
  const QKRows qk = project_qk(x, queries);
  const Tensor q = heads_of(qk.q, config_.heads, position + first_query, true);
  // The keys seen so far in position order, then the prompt's: the queries are the last ones of
  // them, as attend() expects. A cache that has seen nothing adds nothing: the prompt's keys are
  // used as they come (a cat would copy them once more, the whole prompt's keys and values).
  const int64_t kv = config_.kv_heads;
  const auto after_cache = [&](const Tensor& buffer, const Tensor& prompt) {
    return position == 0 ? prompt : cat({in_position_order(buffer, position), prompt}, 2);
  };
  const Tensor k = after_cache(cache.k, heads_of(qk.k, kv, position, true));
  const Tensor v = after_cache(cache.v, project_heads(*v_proj, x, kv, position, false));
  const Tensor out = attend(q, k, v);
  const Tensor new_k = ring_layout(k, tokens, columns), new_v = ring_layout(v, tokens, columns);
  if (cache.reserved > 0) {  // reserved memory stays where it is (a captured graph reads it)
    copy_(cache.k, detach(new_k));
    copy_(cache.v, detach(new_v));
    fill_(cache.seen, static_cast<double>(tokens));
  } else {
    // The keys a projection made for this prompt stay as they are; a view into a larger buffer (a
    // windowed cache's last keys) is copied, or it would hold memory that grows with the prompt.
    cache.k = with_own_storage(new_k);
    cache.v = with_own_storage(new_v);
    cache.seen = Tensor();  // the first step makes it (lay_out_for_steps)
  }
  cache.position = tokens;
  return out;
}

// Each row's keys laid out in a cache sized for the longest row; the rows that have seen fewer
// tokens lag (KVCache).
std::unique_ptr<DecodeState> SoftmaxAttention::stack_states(const std::vector<const DecodeState*>& rows) const {
  LINEA_CHECK(!rows.empty(), "stack_states", "needs at least one state");
  std::vector<const KVCache*> caches;
  std::vector<int64_t> seen;
  for (const DecodeState* row : rows) {
    const auto* cache = dynamic_cast<const KVCache*>(row);
    LINEA_CHECK(cache != nullptr, "SoftmaxAttention", "stack_states needs states made by this layer's init_state");
    caches.push_back(cache);
    for (int64_t s : cache->seen_by_row()) seen.push_back(s);
  }
  auto out = std::make_unique<KVCache>();
  out->position = *std::max_element(seen.begin(), seen.end());
  const int64_t columns = capacity_for(out->position, config_.window);
  std::vector<Tensor> ks, vs;
  size_t row = 0;
  for (const KVCache* cache : caches)
    for (int64_t b = 0; b < cache->k.size(0); ++b, ++row) {
      ks.push_back(relaid(narrow(cache->k, 0, b, 1), seen[row], columns));
      vs.push_back(relaid(narrow(cache->v, 0, b, 1), seen[row], columns));
    }
  out->k = cat(ks, 0);
  out->v = cat(vs, 0);
  out->seen = linea::to(from_vector<int64_t>(seen, {static_cast<int64_t>(seen.size())}), caches[0]->k.device());
  if (std::any_of(seen.begin(), seen.end(), [&](int64_t s) { return s != out->position; }))
    for (int64_t s : seen) out->lag.push_back(out->position - s);
  return out;
}

void SoftmaxAttention::reserve(DecodeState& state, int64_t tokens) const {
  SequenceMixer::reserve(state, tokens);
  auto* cache = dynamic_cast<KVCache*>(&state);
  LINEA_CHECK(cache != nullptr, "SoftmaxAttention", "reserve needs the state made by this layer's init_state");
  LINEA_CHECK(tokens >= 1, "SoftmaxAttention", "reserve needs at least one token, got ", tokens);
  lay_out_for_steps(*cache, config_.window > 0 ? std::min(config_.window, tokens) : tokens);
  cache->reserved = tokens;
  if (rope_) std::tie(cache->cos, cache->sin) = rope_->tables(tokens, cache->k.dtype(), cache->k.device());
}

}  // namespace linea::nn
