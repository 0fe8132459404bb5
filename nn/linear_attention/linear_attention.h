#pragma once
// LinearAttention: the linear and gated linear attention family as one SequenceMixer
// (docs/math.md#linear-attention, #gates and #key-max). Per head, with phi a feature map
// (feature_maps.h), a gate's log decays gk, gv (gates.h) and the key max's scalar decay lambda
// (key_max.h):
//
//   q, k = W_q x, W_k x (per head, width key_dim);  v = W_v x (width head_dim = dv)
//   S_t = diag(e^gv_t) S_{t-1} diag(e^(gk_t + lambda_t)) + v_t (key_scale_t phi(k_t))^T
//   o_t = S_t (scale phi(q_t))
//   o_t <- o_t / (c_t^T scale phi(q_t) + eps)      sum normalization (optional), where c_t is
//                                                  S_t's row for an extra value column of ones
//   y_t = W_o merge_heads(Norm(o_t))               stable normalization (optional)
//
// forward(x) runs the whole sequence through scan() (nn/linear_attention/scan.h: the fused kernel, or the
// chunked parallel form), step(x, state) the recurrent one; the state is S (with c), the running
// key max and the position, fixed in size. prefill(x, state) is forward's scan started from the
// state's S and key max, and it keeps the scan's final S: a prompt in one pass.
#include <memory>
#include <string>
#include <vector>

#include "nn/layers/linear.h"
#include "nn/layers/norm.h"
#include "nn/layers/stacked_projection.h"
#include "nn/linear_attention/feature_maps.h"
#include "nn/linear_attention/gates.h"
#include "nn/linear_attention/key_max.h"
#include "nn/linear_attention/scan.h"
#include "nn/mixer.h"

namespace linea::nn::linear {

// The stable normalization on each head's output (Qin et al. 2022): HeadNorm with one gain of
// size dv shared by the heads (GLA's and ReGLA's form).
enum class OutputNorm { None, RMS, Layer };

// The factor on phi(q) (so on every phi(q).phi(k)). m is the feature dim: the number of terms of
// the inner product, which is the paper's d for the elementwise maps (m = key_dim).
enum class QueryScale {
  InvSqrtDim,     // 1 / sqrt(m), as in softmax attention
  ReGLAVariance,  // 1 / (e sqrt(m (e^2 - 1))): ReGLA's Theorem 3.1, for exp feature maps
  None,
};

struct LinearAttentionConfig {
  int64_t d_model = 0;
  int64_t heads = 1;
  int64_t head_dim = 0;  // dv, the value width of a head; also the q/k width unless key_dim is set
  int64_t key_dim = 0;   // q/k width per head, the feature map's input d; 0 means head_dim. For
                         // the elementwise maps it is the feature dim m (ReGLA's Table 6 varies it)
  FeatureMapConfig feature_map;
  GateConfig gate;       // its log_decay_floor (default -20) is the layer's floor
  bool sum_normalization = false;
  double sum_norm_eps = 1e-6;  // added to c^T phi(q); only meaningful for maps that can give 0
  OutputNorm output_norm = OutputNorm::RMS;
  double output_norm_eps = 1e-6;
  QueryScale scale = QueryScale::InvSqrtDim;
  KeyMaxMode key_max = KeyMaxMode::Prefix;  // only for maps with a key log shift (normalized exp)
  // The normalized exp map with the prefix key max through the fused op normalized_exp (queries
  // with their scale, keys with their running max: one kernel each way for each); false: the
  // composite map (feature_maps.h) and key max (key_max.h), the reference it is tested against.
  // The global key max and the product map always take the composite path.
  bool fused_feature_map = true;
  // Decoding (step() with grad mode off) through the fused op linear_attention_step: the
  // projections as one product (nn/layers/stacked_projection.h), then the maps, the decays (ReGLA's
  // refined gate included), the state update, the read-out and the output RMSNorm in one kernel.
  // It covers the identity and normalized exp maps, every gate but the scalar one (its key scale)
  // and no sum normalization, which is every preset but la-relu, la-elu, hedgehog and rfa; other
  // configs, and false, take the composite step, the reference it is tested against.
  bool fused_step = true;
  ScanOptions scan;                         // forward's scan: fused, or chunked (chunk_size 64, sub_block 16)
  bool projection_bias = false;             // biases on W_q, W_k, W_v, W_o
};

// The baselines of the ReGLA paper (Tables 3, 4 and 6) and ReGLA itself. Common to all: q, k, v
// and output projections without bias, key_dim = head_dim, a stable per-head RMSNorm on the
// output (the paper's Table 4: "we apply stable normalization" to every baseline), chunk 64.
//   la-relu     ReLU map, no gate, sum normalization, no scale
//   la-elu      ELU + 1 map, no gate, sum normalization, no scale (Katharopoulos et al.)
//   hedgehog    Hedgehog map (m = 2 head_dim), no gate, sum normalization, no scale
//   rfa         random Fourier map (m = head_dim), scalar gate, sum normalization, no scale
//   fast-decay  identity map, Fast Decay outer-product gate, no sum normalization, 1/sqrt(m)
//   gla         identity map, GLA key gate (low rank 16, tau 16), no sum normalization, 1/sqrt(m)
//   regla       normalized exp with the prefix key max, refined gate on the VALUE dim, no sum
//               normalization, ReGLA's variance scale
// With sum normalization a query scale cancels (up to eps), so those presets use none.
enum class LinearAttentionPreset { LaRelu, LaElu, Hedgehog, Rfa, FastDecay, Gla, Regla };

LinearAttentionConfig linear_attention_preset(LinearAttentionPreset preset, int64_t d_model, int64_t heads,
                                              int64_t head_dim);
std::vector<LinearAttentionPreset> all_linear_attention_presets();
std::string preset_name(LinearAttentionPreset preset);  // "la-relu", ..., "regla"
LinearAttentionPreset parse_linear_attention_preset(const std::string& name);

// One line naming every choice of a config (map, gate and its decay dim, normalizations, scale,
// key max, floor, chunk), for logs and results: "map=normalized_exp(m=64) gate=regla(value) ...".
std::string describe(const LinearAttentionConfig& config);

// The query scale's value for feature dim m.
double query_scale_value(QueryScale scale, int64_t feature_dim);

// "none", "rms", "layer".
std::string output_norm_name(OutputNorm norm);
OutputNorm parse_output_norm(const std::string& name);
// "inv_sqrt_dim", "variance", "none".
std::string query_scale_name(QueryScale scale);
QueryScale parse_query_scale(const std::string& name);

// What decoding carries between tokens: the same size after 1 token or 10^6.
struct LinearAttentionState : DecodeState {
  Tensor state;    // (B, H, dv (+1 with sum normalization: the c column), m)
  Tensor key_max;  // (B, H, 1, 1): the running key max; undefined before the first token and for
                   // maps without a key log shift
  // init_state() allocates `state` without writing it: a prefill starts from no state and
  // replaces it, so zeros would be a fill kernel per layer for nothing (a short prompt is bound by
  // the host's launches). While this is set the memory stands for zeros; written_state() and
  // members(), the way everything else reads the state, write them first.
  bool state_unwritten = false;
  Tensor& written_state() {
    if (state_unwritten) {
      fill_(state, 0.0);
      state_unwritten = false;
    }
    return state;
  }
  std::vector<std::pair<std::string, Tensor*>> members() override {
    written_state();
    return {{"state", &state}, {"key_max", &key_max}};
  }
};

class LinearAttention : public OutputProjectedMixer {
 public:
  LinearAttention(const LinearAttentionConfig& config, Generator& gen);

  Tensor forward(const Tensor& x) override;  // (B, T, D) -> (B, T, D)
  std::unique_ptr<DecodeState> init_state(int64_t batch) const override;
  // (B, D) -> (B, D). With KeyMaxMode::Global it uses the running max all the same: decoding has
  // no future to take a max over (which is why the global mode's training output differs from
  // its decoding).
  Tensor step(const Tensor& x, DecodeState& state) override;
  // The block's norm folded into the step's stacked projection, the residual into its output
  // projection, when the fused step applies.
  Tensor residual_step(const Tensor& x, const Norm& norm, DecodeState& state) override;

  const LinearAttentionConfig& config() const { return config_; }
  int64_t key_dim() const { return key_dim_; }
  int64_t feature_dim() const { return feature_map_->feature_dim(); }
  // The width of the state's value side: head_dim, plus one with sum normalization.
  int64_t state_value_dim() const { return config_.head_dim + (config_.sum_normalization ? 1 : 0); }

 protected:
  // The scan from the state's S up to the out projection's input, (B, T, H dv), or the last
  // token's with last_only. With KeyMaxMode::Global too it normalizes keys by the running max, as
  // step() does.
  Tensor prefill_mixed(const Tensor& x, DecodeState& state, bool last_only) override;
  const Linear& output_projection() const override { return *out_proj_; }

 private:
  // The scan's inputs for T tokens, (B, H, T, .), and the last running key max.
  struct ScanInputs {
    Tensor q, k, v, gk, gv;
    Tensor last_key_max;
  };
  ScanInputs prepare(const Tensor& x, const Tensor& previous_key_max, KeyMaxMode mode);
  bool fuses_normalized_exp(KeyMaxMode mode) const;
  // Whether step() takes the fused op (fused_step, above), and that step: its input is
  // input_norm(x) (x itself without a norm), and `residual` is added to its output.
  bool fused_step_applies() const;
  Tensor fused_step(const Tensor& x, LinearAttentionState& state, const Norm* input_norm = nullptr,
                    const Tensor& residual = Tensor());
  // o (B, T, H, state_value_dim) -> y (B, T, D): sum normalization, norm, merge, out projection.
  Tensor finish(const Tensor& o);
  // finish() without the out projection: (B, T, H dv), what out_proj reads.
  Tensor output_heads(const Tensor& o) const;
  Tensor heads_first(const Tensor& y, int64_t width) const;  // (B, T, H w) -> (B, H, T, w)

  LinearAttentionConfig config_;
  int64_t key_dim_;
  double scale_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, out_proj_;
  std::shared_ptr<FeatureMap> feature_map_;
  std::shared_ptr<Gate> gate_;       // null without a gate
  std::shared_ptr<HeadNorm> norm_;   // null without an output norm
  StackedProjection step_projections_;      // the fused step's q, k, v (and refined gate) products
  StackedProjection sequence_projections_;  // prepare()'s: q, k, v and the gate's products of x
};

}  // namespace linea::nn::linear
