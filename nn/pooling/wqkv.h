#pragma once
// WQKV attention pooling (docs/math.md#wqkv-pooling; the paper "A linear transformer based on
// attention pooling"). A fixed number S of memory slots pools the history with softmax weights
// over time, and each token attends to the slots instead of to every past token:
//
//   q, k, v = W_q x, W_k x, W_v x  (width C per head);   w = W_w x  (one weight per slot)
//   K'_l[j] = sum_{i<=l} e^{w_ij} k_i / sum_{i<=l} e^{w_ij}     (S x C: slot j's softmax-pooled key)
//   V'_l[j] = sum_{i<=l} e^{w_ij} v_i / sum_{i<=l} e^{w_ij}
//   o_l     = softmax_j(scale q_l . K'_l[j]) V'_l                (softmax over the S slots)
//   y_l     = W_o merge_heads(o_l)
//
// Causal (K'_l sees i <= l), O(T S C) work and a state of fixed size: M = sum e^{w} k and
// sum e^{w} v (S x C each) and N = sum e^{w} (S).
//
// Stability: e^{w} overflows for large w, so both forms keep each slot's running max m_l =
// max_{i<=l} w_ij and hold M, N relative to it, M_l = sum_{i<=l} e^{w_ij - m_lj} k_i (a prefix
// log-sum-exp): every exponent is <= 0 and N_l >= 1 (the max term), so no overflow and no 0/0.
// K' = M / N does not depend on the reference m, so m is a constant for autograd (detached) and
// the gradient is still exact. When the max grows, the sums are rescaled by e^{m_old - m_new},
// which is a per-slot decay; so the parallel form is the gated scan (nn/linear_attention/scan.h) three
// times, with log decay g_l = m_{l-1} - m_l <= 0 on the slot dim:
//   q_l . M_l[j] for all j:   S_l = diag(e^{g_l}) S_{l-1} + e^{w_l - m_l} k_l^T   (S x C), read by q_l
//   N_l:                      the same with k = q = 1 (nn/recurrent/linear_recurrence.h)
//   o_l = sum_j p_lj V'_l[j]: S_l = S_{l-1} diag(e^{g_l}) + v_l (e^{w_l - m_l})^T (C x S), read
//                             by p_l / N_l, p_l = softmax_j(scale q_l . M_l[j] / N_l[j])
// and decoding is the same recurrence one token at a time. prefill runs the three scans from a
// decoding state (M, N, P and m) and keeps their final states.
//
// Choices the paper leaves open (its formulas are for one head, batch 1, no scale, no output map):
//   * heads: 1 by default, as in the paper; with H heads each has its own C = head_dim channels
//     and its own S slots (W_w maps to H S weights).
//   * scale: 1 / sqrt(C) on q by default, as in GPT's attention that the paper says it follows
//     ("similar to GPT"); "none" gives the paper's formula as written.
//   * an output projection W_o (GPT's), so the heads are mixed and the width returns to D.
//   * no biases on the projections (the paper writes K = W_k X), Xavier-uniform init; w starts
//     small, so the slots start as near-uniform averages of the history.
//   * slots S = 64 by default.
#include <memory>
#include <string>

#include "nn/layers/linear.h"
#include "nn/linear_attention/scan.h"
#include "nn/mixer.h"

namespace linea::nn {

enum class WqkvScale { InvSqrtDim, None };

struct WqkvConfig {
  int64_t d_model = 0;
  int64_t heads = 1;
  int64_t head_dim = 0;  // C per head; 0: d_model / heads
  int64_t slots = 64;    // S memory slots per head (the paper's D)
  WqkvScale scale = WqkvScale::InvSqrtDim;
  bool bias = false;  // on every projection
  linear::ScanOptions scan{};
};

std::string wqkv_scale_name(WqkvScale scale);  // "inv_sqrt_dim", "none"
WqkvScale parse_wqkv_scale(const std::string& name);

struct WqkvState : DecodeState {
  Tensor keys;        // (B, H, S, C): M = sum_i e^{w_i - m} k_i
  Tensor values;      // (B, H, S, C): sum_i e^{w_i - m} v_i
  Tensor normalizer;  // (B, H, S):    N = sum_i e^{w_i - m}
  Tensor max;         // (B, H, S):    m = max_i w_i, -inf before the first token
  std::vector<std::pair<std::string, Tensor*>> members() override {
    return {{"keys", &keys}, {"values", &values}, {"normalizer", &normalizer}, {"max", &max}};
  }
};

class WqkvPooling : public SequenceMixer {
 public:
  WqkvPooling(const WqkvConfig& config, Generator& gen);

  Tensor forward(const Tensor& x) override;  // pool() from the start: (B, T, D) -> (B, T, D)
  std::unique_ptr<DecodeState> init_state(int64_t batch) const override;  // empty sums, max = -inf
  Tensor step(const Tensor& x, DecodeState& state) override;  // the sums rescaled to the new max, plus the token's
  Tensor prefill(const Tensor& x, DecodeState& state) override;  // pool() from the state's sums

  const WqkvConfig& config() const { return config_; }

  std::shared_ptr<Linear> q_proj, k_proj, v_proj, w_proj, out_proj;

 private:
  struct Projected {
    Tensor q, k, v, w;  // (B, H, T, C) with q scaled; w (B, H, T, S)
  };
  Projected project(const Tensor& x) const;
  // The pooled attention o (B, H, T, C) of T >= 1 projected tokens: from the start of a sequence
  // when state is null, else from *state, which then receives the state after the T tokens.
  Tensor pool(const Projected& p, WqkvState* state) const;
  Tensor finish(const Tensor& o) const;  // (B, H, T, C) -> (B, T, D)

  WqkvConfig config_;
  double scale_;
};

}  // namespace linea::nn
