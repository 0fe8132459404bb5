#include "nn/pooling/wqkv.h"

#include <cmath>
#include <limits>

#include "nn/layers/check.h"
#include "nn/linear_attention/key_max.h"
#include "nn/names.h"
#include "nn/recurrent/linear_recurrence.h"

namespace linea::nn {

namespace {
const names::Table<WqkvScale> kScaleNames[] = {{WqkvScale::InvSqrtDim, "inv_sqrt_dim"}, {WqkvScale::None, "none"}};
}  // namespace

std::string wqkv_scale_name(WqkvScale scale) { return names::name_in(kScaleNames, scale); }
WqkvScale parse_wqkv_scale(const std::string& name) { return names::parse_in(kScaleNames, name, "WqkvPooling", "scale"); }

WqkvPooling::WqkvPooling(const WqkvConfig& config, Generator& gen) : config_(config) {
  WqkvConfig& c = config_;
  check_positive(c.d_model, "d_model", "WqkvPooling");
  check_positive(c.heads, "heads", "WqkvPooling");
  check_positive(c.slots, "slots", "WqkvPooling");
  c.head_dim = resolved_head_dim(c.head_dim, c.d_model, c.heads, "WqkvPooling");
  check_positive(c.head_dim, "head_dim", "WqkvPooling");
  check_scan_options(c.scan, "WqkvPooling");
  scale_ = c.scale == WqkvScale::InvSqrtDim ? 1.0 / std::sqrt(static_cast<double>(c.head_dim)) : 1.0;
  const int64_t D = c.d_model, width = c.heads * c.head_dim;
  const LinearOptions proj{.bias = c.bias, .init = LinearInit::XavierUniform};
  q_proj = register_module("q_proj", std::make_shared<Linear>(D, width, gen, proj));
  k_proj = register_module("k_proj", std::make_shared<Linear>(D, width, gen, proj));
  v_proj = register_module("v_proj", std::make_shared<Linear>(D, width, gen, proj));
  w_proj = register_module("w_proj", std::make_shared<Linear>(D, c.heads * c.slots, gen, proj));
  out_proj = register_module("out_proj", std::make_shared<Linear>(width, D, gen, proj));
}

WqkvPooling::Projected WqkvPooling::project(const Tensor& x) const {
  const int64_t B = x.size(0), T = x.size(1), H = config_.heads;
  // (B, T, H n) -> (B, H, T, n)
  auto heads_first = [&](const Tensor& y, int64_t n) { return permute(reshape(y, {B, T, H, n}), {0, 2, 1, 3}); };
  const int64_t C = config_.head_dim;
  return {.q = heads_first(q_proj->forward(x), C) * scale_,
          .k = heads_first(k_proj->forward(x), C),
          .v = heads_first(v_proj->forward(x), C),
          .w = heads_first(w_proj->forward(x), config_.slots)};
}

Tensor WqkvPooling::finish(const Tensor& o) const {
  const Tensor merged = transpose(o, 1, 2);  // (B, T, H, C)
  return out_proj->forward(reshape(merged, {o.size(0), o.size(2), config_.heads * config_.head_dim}));
}

// forward is, per head and slot j, with m_l the running max of w over positions <= l:
//   e_l = e^{w_l - m_l},  g_l = m_{l-1} - m_l (g_0 = 0: the state before the first token is empty)
//   M_l = e^{g_l} M_{l-1} + e_l k_l^T,  N_l = e^{g_l} N_{l-1} + e_l,  P_l = P_{l-1} e^{g_l} + v_l e_l^T
//   o_l = P_l (p_l / N_l),  p_l = softmax(M_l q_l / N_l)
// with each recurrence run by the gated scan (see the header). From a state, m_{-1} is the state's
// max and M_{-1}, N_{-1}, P_{-1} its sums.
Tensor WqkvPooling::pool(const Projected& p, WqkvState* state) const {
  const int64_t T = p.w.size(2);
  Tensor m, log_decay;  // (B, H, T, S), constants for autograd
  {
    NoGradGuard no_grad;
    m = linear::running_max(detach(p.w), 2);
    Tensor before_first = narrow(m, 2, 0, 1);  // m_{-1}: from nothing, m_0 itself (g_0 = 0)
    if (state) {
      before_first = unsqueeze(state->max, 2);
      m = maximum(m, before_first);
    }
    log_decay = cat({before_first, narrow(m, 2, 0, T - 1)}, 2) - m;
    // A state that has seen no token has m = -inf, so g_0 = -inf, which would become NaN in the
    // scans' masks (-inf * 0). Its sums are empty and stay empty under any decay, so flooring at
    // -1e4 (exp gives exactly 0 in float32 and float64, as chunked_scan's floor) changes nothing.
    if (state) log_decay = clamp(log_decay, -1e4, std::nullopt);
  }
  const Tensor e = exp(p.w - m);  // <= 1, and exactly 1 where w_l is the running max
  // The scans' states: M (B, H, S, C) as is, N (B, H, S), and P (B, H, C, S) transposed.
  Tensor keys, normalizer, values_t;
  const Tensor qm = linear::scan(p.q, p.k, e, Tensor(), log_decay, state ? state->keys : Tensor(),
                                 state ? &keys : nullptr, config_.scan);
  const Tensor n = linear_recurrence(log_decay, e, state ? state->normalizer : Tensor(),
                                     state ? &normalizer : nullptr, config_.scan);  // >= 1
  const Tensor probs = softmax(qm / n, -1);                                         // (B, H, T, S)
  const Tensor o = linear::scan(probs / n, e, p.v, log_decay, Tensor(),
                                state ? contiguous(transpose(state->values, -1, -2)) : Tensor(),
                                state ? &values_t : nullptr, config_.scan);
  if (state) {
    state->keys = keys;
    state->values = transpose(values_t, -1, -2);
    state->normalizer = normalizer;
    state->max = select(m, 2, T - 1);
  }
  return o;
}

Tensor WqkvPooling::forward(const Tensor& x) {
  check_sequence_input(x, config_.d_model, "WqkvPooling");
  if (x.size(1) == 0) return zeros({x.size(0), 0, config_.d_model}, {x.dtype(), x.device()});
  return finish(pool(project(x), nullptr));
}

Tensor WqkvPooling::prefill(const Tensor& x, DecodeState& state_in) {
  WqkvState* s = &prefill_state<WqkvState>(x, state_in, config_.d_model, "WqkvPooling", &WqkvState::keys);
  const Tensor o = pool(project(x), s);
  s->position += x.size(1);
  own_storage(*s);
  return finish(o);
}

std::unique_ptr<DecodeState> WqkvPooling::init_state(int64_t batch) const {
  LINEA_CHECK(batch >= 0, "WqkvPooling", "batch must be non-negative, got ", batch);
  const TensorOptions like{q_proj->weight.dtype(), q_proj->weight.device()};
  const int64_t H = config_.heads, S = config_.slots, C = config_.head_dim;
  auto s = std::make_unique<WqkvState>();
  s->keys = zeros({batch, H, S, C}, like);
  s->values = zeros({batch, H, S, C}, like);
  s->normalizer = zeros({batch, H, S}, like);
  s->max = full({batch, H, S}, -std::numeric_limits<double>::infinity(), like);
  return s;
}

// forward is, per slot, m' = max(m, w), e = e^{w - m'}, the sums rescaled by e^{m - m'} (0 before
// the first token, where m = -inf) plus this token's terms; then o = sum_j p_j V'[j].
Tensor WqkvPooling::step(const Tensor& x, DecodeState& state_in) {
  WqkvState* s = &step_state<WqkvState>(x, state_in, config_.d_model, "WqkvPooling", &WqkvState::keys);
  const Projected p = project(unsqueeze(x, 1));
  auto now = [](const Tensor& t) { return select(t, 2, 0); };  // (B, H, 1, .) -> (B, H, .)
  const Tensor q = now(p.q), k = now(p.k), v = now(p.v), w = now(p.w);
  Tensor m, decay;  // (B, H, S)
  {
    NoGradGuard no_grad;
    m = maximum(s->max, detach(w));
    decay = exp(s->max - m);
  }
  const Tensor e = exp(w - m);
  // (B, H, S) x (B, H, C) -> (B, H, S, C): the token's term of each slot's sum.
  auto pooled = [&](const Tensor& sum_so_far, const Tensor& x_t) {
    return unsqueeze(decay, -1) * sum_so_far + unsqueeze(e, -1) * unsqueeze(x_t, -2);
  };
  s->keys = pooled(s->keys, k);
  s->values = pooled(s->values, v);
  s->normalizer = decay * s->normalizer + e;
  s->max = m;
  const Tensor scores = squeeze(matmul(s->keys, unsqueeze(q, -1)), -1) / s->normalizer;  // q . K'[j]
  const Tensor weights = softmax(scores, -1) / s->normalizer;                            // p_j / N_j
  const Tensor o = squeeze(matmul(unsqueeze(weights, -2), s->values), -2);              // (B, H, C)
  ++s->position;
  return select(finish(unsqueeze(o, 2)), 1, 0);
}

}  // namespace linea::nn
