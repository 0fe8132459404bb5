#pragma once
// Gated update rules (docs/math.md#gates), each written as the log decays the
// scan takes (nn/linear_attention/scan.h):
//
//   S_t = diag(exp(gv_t)) S_{t-1} diag(exp(gk_t)) + v_t (key_scale_t phi(k_t))^T
//
//   None        gk = gv = undefined: plain linear attention, S_t = S_{t-1} + v phi(k)^T.
//   Scalar      RFA (Peng et al. 2021): g = sigmoid(w_g.x + b_g), one per head;
//               S_t = g S_{t-1} + (1 - g) v phi(k)^T: gk = log g (a scalar, last dim 1) and
//               key_scale = 1 - g. Scaling the KEY (not v) by 1 - g makes the sum normalizer
//               c_t = g c_{t-1} + (1 - g) phi(k_t) ride the same scan.
//   FastDecay   Mao (2022): G = sigmoid(W_z x + b_z) sigmoid(W_f x + b_f)^T, an outer product,
//               so gv = logsigmoid(W_z x + b_z) (value dim) and gk = logsigmoid(W_f x + b_f)
//               (key/feature dim) at once.
//   GLA         Yang et al. (2024): alpha = sigmoid(W x + b)^(1/tau) on the key dim,
//               gk = logsigmoid(W x + b) / tau with tau = 16 (GLA's normalizer). W is full rank
//               by default; gla_low_rank > 0 factors it as GLA does (D -> r -> H m, bias on the
//               second factor only).
//   ReGLA       Lu et al.: f = g (g + 2 r (1 - g)), g = sigmoid(a), r = sigmoid(c), computed in
//               log space: log f = logsigmoid(a) + logaddexp(logsigmoid(a),
//               ln 2 + logsigmoid(c) + logsigmoid(-a)); on the value dim by default (the paper's
//               equations), the key dim as an option (the paper's GLA-based kernels).
//
// Every gate's log decay is floored (default -20) before anything exponentiates it: a gate
// saturated at 0 would otherwise give -inf or a huge negative number that cancels badly in the
// chunked form's cumulative sums. Fast Decay floors each of its two factors.
//
// Initialisation (the papers leave it open): gate weights use gate_init_ (GLA's Xavier with gain
// 2^-2.5), gate biases start at GateConfig::bias_init (0 by default, for every gate; the ReGLA
// paper sets extreme biases only for its saturation study).
#include <memory>
#include <optional>
#include <string>

#include "nn/layers/linear.h"
#include "nn/layers/stacked_projection.h"
#include "nn/module.h"

namespace linea::nn::linear {

enum class GateKind { None, Scalar, FastDecay, GLA, ReGLA };
enum class DecayDim { Value, Key };

struct GateConfig {
  GateKind kind = GateKind::None;
  DecayDim regla_dim = DecayDim::Value;  // ReGLA only: which dim of the state its gate decays
  int64_t gla_low_rank = 0;              // GLA only: 0 = full-rank projection
  double gla_normalizer = 16.0;          // GLA only: tau in alpha = sigmoid(.)^(1/tau)
  double log_decay_floor = -20.0;        // per-step log decays are clamped to >= this
  double bias_init = 0.0;                // every gate bias starts here
  // ReGLA only: the floored log f through the fused op linea::refined_log_gate (one kernel each
  // way, the projections' biases added inside it); false: the composite refined_log_gate below,
  // clamped, the reference it is tested against.
  bool fused = true;
};

// Everything a gate contributes, laid out for the scan; any member may be undefined.
struct GateOutput {
  Tensor gk;         // (B, H, T, m) or (B, H, T, 1): log decay on the key (feature) dim, <= 0
  Tensor gv;         // (B, H, T, dv): log decay on the value dim, <= 0
  Tensor key_scale;  // (B, H, T, 1): multiplies phi(k) (RFA's 1 - g)
};

// ReGLA's refined gate as the fused decoding step (linea::linear_attention_step) takes it: the
// projections of its two pre-activations (their products and biases go to the step's kernel,
// which computes the floored log f itself), the dim it decays and its floor.
struct RefinedGateProjections {
  const Linear* forget;
  const Linear* refine;
  DecayDim dim;
  double floor;
};

// A gate log sigmoid(W x + b) / normalizer, floored, on the key dim and/or the value dim (GLA,
// Fast Decay) as the fused decoding step takes it: each side's projection, or nullptr where the
// gate does not decay that side; key_down is GLA's low-rank first factor (x -> rank, no bias),
// whose output the key projection then reads instead of x, or nullptr.
struct LogSigmoidGateProjections {
  const Linear* key_down;
  const Linear* key;
  const Linear* value;
  double normalizer;
  double floor;
};

class Gate : public Module {
 public:
  // x (B, T, D) -> the gate's decays for T tokens (T = 1 when decoding).
  virtual GateOutput forward(const Tensor& x) = 0;
  // True when the gate decays the value dim channel by channel (gv of width dv): such a decay
  // cannot be shared by the sum normalizer c, which has no value dim.
  virtual bool decays_value_channels() const { return false; }
  // The refined gate's projections, for a decoding step that computes the gate inside its own
  // kernel; nullopt for every other gate (their decays come from forward()).
  virtual std::optional<RefinedGateProjections> refined_projections() const { return std::nullopt; }
  // The same for the log-sigmoid gates; nullopt for every other gate.
  virtual std::optional<LogSigmoidGateProjections> log_sigmoid_projections() const { return std::nullopt; }
  // The gate's products of x, for a caller that runs them in one product with its own
  // (LinearAttention::prepare stacks them with q, k and v), each with whether its bias is added
  // there; empty where a projection is not one Linear of x (GLA's low rank).
  virtual std::vector<StackedProjection::Part> products_of_x() const = 0;
  // The gate from the results of products_of_x(), (B, T, width) each, in that order.
  virtual GateOutput forward_from_products(const std::vector<Tensor>& products) = 0;
};

// A gate for `heads` heads with feature dim m (the key dim of the state) and value dim dv.
// Returns nullptr for GateKind::None.
std::shared_ptr<Gate> make_gate(const GateConfig& config, int64_t d_model, int64_t heads, int64_t feature_dim,
                                int64_t value_dim, Generator& gen);

// log(e^a + e^b), shifted by the (detached) larger operand so it never overflows; its gradient
// is the exact softmax weight of each operand.
Tensor logaddexp(const Tensor& a, const Tensor& b);

// The refined gate's log f for pre-activations a (forget) and c (refine), before the floor:
// the composite chain, the reference of the fused linea::refined_log_gate(a, c, floor).
Tensor refined_log_gate(const Tensor& a, const Tensor& c);

// "none", "scalar" (alias "rfa"), "fast_decay", "gla", "regla".
std::string gate_name(GateKind kind);
GateKind parse_gate(const std::string& name);
// "value", "key".
std::string decay_dim_name(DecayDim dim);
DecayDim parse_decay_dim(const std::string& name);

}  // namespace linea::nn::linear
