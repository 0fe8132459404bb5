#include "nn/linear_attention/gates.h"

#include <cmath>

#include "nn/init.h"
#include "nn/layers/linear.h"
#include "nn/names.h"
#include "tensor/error.h"

namespace linea::nn::linear {

Tensor logaddexp(const Tensor& a, const Tensor& b) {
  Tensor shift;
  {
    NoGradGuard no_grad;  // any shift gives the same value; a constant one keeps the gradient exact
    shift = maximum(a, b);
  }
  return shift + log(exp(a - shift) + exp(b - shift));
}

// f = g (g + 2 r (1 - g)) with g = sigmoid(a), r = sigmoid(c), 1 - g = sigmoid(-a), so
// log f = log g + log(g + 2 r (1 - g)) = logsigmoid(a) + logaddexp(logsigmoid(a), ln 2 +
// logsigmoid(c) + logsigmoid(-a)). Every term is a log-sigmoid: finite for any finite a, c,
// where the direct product underflows to log 0 once g is tiny.
Tensor refined_log_gate(const Tensor& a, const Tensor& c) {
  const Tensor log_g = logsigmoid(a);
  return log_g + logaddexp(log_g, (logsigmoid(c) + std::log(2.0)) + logsigmoid(neg(a)));
}

namespace {

// A gate's pre-activation for every head: x (B, T, D) -> (B, H, T, size), through one Linear
// (D -> H size) or, with rank > 0, two (D -> rank without bias -> H size), GLA's low-rank form.
class GateProjection final : public Module {
 public:
  GateProjection(int64_t d_model, int64_t heads, int64_t size, int64_t rank, double bias_init, Generator& gen)
      : heads_(heads), size_(size) {
    if (rank > 0) {
      down_ = register_module("down", std::make_shared<Linear>(d_model, rank, gen, LinearOptions{.bias = false}));
      init::gate_init_(down_->weight, gen);
    }
    up_ = register_module("up", std::make_shared<Linear>(rank > 0 ? rank : d_model, heads * size, gen));
    init::gate_init_(up_->weight, gen);
    init::constant_(up_->bias, bias_init);
  }
  Tensor forward(const Tensor& x) const { return heads_first(up_->forward(down_ ? down_->forward(x) : x)); }
  // The pre-activation without the bias, and the bias shaped (H, 1, size) to broadcast against
  // it: for a gate op that adds the bias itself (linea::refined_log_gate).
  Tensor forward_without_bias(const Tensor& x) const {
    return heads_first(up_->forward_without_bias(down_ ? down_->forward(x) : x));
  }
  Tensor head_bias() const { return view(up_->bias, {heads_, 1, size_}); }
  // The one Linear of a full-rank projection (nullptr for a low-rank one: two products).
  const Linear* single_linear() const { return down_ ? nullptr : up_.get(); }
  const Linear* down_linear() const { return down_.get(); }  // nullptr at full rank
  const Linear* up_linear() const { return up_.get(); }

  // (B, T, H size) -> (B, H, T, size), a view.
  Tensor heads_first(const Tensor& y) const {
    return permute(view(y, {y.size(0), y.size(1), heads_, size_}), {0, 2, 1, 3});
  }

 private:

  int64_t heads_, size_;
  std::shared_ptr<Linear> down_, up_;
};

// A gate computed from the pre-activations of its projections of x. forward(x) projects them
// itself; a caller that runs the projections in one product with its own (LinearAttention) takes
// products_of_x() and hands the results to forward_from_products().
class GateBase : public Gate {
 public:
  GateOutput forward(const Tensor& x) override {
    std::vector<Tensor> pre;
    for (const GateProjection* p : projections())
      pre.push_back(adds_own_biases() ? p->forward_without_bias(x) : p->forward(x));
    return from_preactivations(pre);
  }
  std::vector<StackedProjection::Part> products_of_x() const override {
    std::vector<StackedProjection::Part> parts;
    for (const GateProjection* p : projections()) {
      if (!p->single_linear()) return {};
      parts.push_back({p->single_linear(), !adds_own_biases()});
    }
    return parts;
  }
  GateOutput forward_from_products(const std::vector<Tensor>& products) override {
    const std::vector<const GateProjection*> projs = projections();
    LINEA_CHECK(products.size() == projs.size(), "gate", "expected ", projs.size(), " products of x, got ",
                products.size());
    std::vector<Tensor> pre;
    for (size_t i = 0; i < projs.size(); ++i) pre.push_back(projs[i]->heads_first(products[i]));
    return from_preactivations(pre);
  }

 protected:
  explicit GateBase(const GateConfig& config) : floor_(config.log_decay_floor) {}
  // The gate's projections of x, in the order from_preactivations takes their results.
  virtual std::vector<const GateProjection*> projections() const = 0;
  // The gate from those pre-activations, (B, H, T, size) each: with their biases added, unless
  // adds_own_biases() (then the gate's op adds them itself).
  virtual GateOutput from_preactivations(const std::vector<Tensor>& pre) const = 0;
  virtual bool adds_own_biases() const { return false; }
  // Applied to every per-step log decay before the scan exponentiates anything.
  Tensor floored(const Tensor& log_decay) const { return clamp(log_decay, floor_, std::nullopt); }
  double floor_;
};

class ScalarGate final : public GateBase {
 public:
  ScalarGate(const GateConfig& c, int64_t d_model, int64_t heads, Generator& gen) : GateBase(c) {
    proj_ = register_module("proj", std::make_shared<GateProjection>(d_model, heads, 1, 0, c.bias_init, gen));
  }

 private:
  std::vector<const GateProjection*> projections() const override { return {proj_.get()}; }
  GateOutput from_preactivations(const std::vector<Tensor>& pre) const override {
    const Tensor log_g = floored(logsigmoid(pre[0]));
    // 1 - g from the floored log g (not sigmoid(-a)), so decay and input weight stay exactly
    // complementary; expm1 keeps 1 - g accurate when g is close to 1.
    return {.gk = log_g, .gv = Tensor(), .key_scale = neg(expm1(log_g))};
  }

  std::shared_ptr<GateProjection> proj_;
};

class FastDecayGate final : public GateBase {
 public:
  FastDecayGate(const GateConfig& c, int64_t d_model, int64_t heads, int64_t m, int64_t dv, Generator& gen)
      : GateBase(c) {
    value_ = register_module("value_proj", std::make_shared<GateProjection>(d_model, heads, dv, 0, c.bias_init, gen));
    key_ = register_module("key_proj", std::make_shared<GateProjection>(d_model, heads, m, 0, c.bias_init, gen));
  }
  bool decays_value_channels() const override { return true; }
  std::optional<LogSigmoidGateProjections> log_sigmoid_projections() const override {
    if (!value_->single_linear() || !key_->single_linear()) return std::nullopt;
    return LogSigmoidGateProjections{.key_down = nullptr, .key = key_->single_linear(), .value = value_->single_linear(),
                                     .normalizer = 1.0, .floor = floor_};
  }

 private:
  std::vector<const GateProjection*> projections() const override { return {value_.get(), key_.get()}; }
  GateOutput from_preactivations(const std::vector<Tensor>& pre) const override {
    return {.gk = floored(logsigmoid(pre[1])), .gv = floored(logsigmoid(pre[0])), .key_scale = {}};
  }

  std::shared_ptr<GateProjection> value_, key_;
};

class GLAGate final : public GateBase {
 public:
  GLAGate(const GateConfig& c, int64_t d_model, int64_t heads, int64_t m, Generator& gen)
      : GateBase(c), normalizer_(c.gla_normalizer) {
    LINEA_CHECK(c.gla_normalizer > 0, "GLA gate", "gla_normalizer must be positive, got ", c.gla_normalizer);
    LINEA_CHECK(c.gla_low_rank >= 0, "GLA gate", "gla_low_rank must be >= 0, got ", c.gla_low_rank);
    proj_ = register_module("proj",
                            std::make_shared<GateProjection>(d_model, heads, m, c.gla_low_rank, c.bias_init, gen));
  }
  std::optional<LogSigmoidGateProjections> log_sigmoid_projections() const override {
    return LogSigmoidGateProjections{.key_down = proj_->down_linear(), .key = proj_->up_linear(), .value = nullptr,
                                     .normalizer = normalizer_, .floor = floor_};
  }

 private:
  std::vector<const GateProjection*> projections() const override { return {proj_.get()}; }
  GateOutput from_preactivations(const std::vector<Tensor>& pre) const override {
    return {.gk = floored(logsigmoid(pre[0]) / normalizer_), .gv = {}, .key_scale = {}};
  }

  double normalizer_;
  std::shared_ptr<GateProjection> proj_;
};

class ReGLAGate final : public GateBase {
 public:
  ReGLAGate(const GateConfig& c, int64_t d_model, int64_t heads, int64_t m, int64_t dv, Generator& gen)
      : GateBase(c), dim_(c.regla_dim), fused_(c.fused) {
    const int64_t size = dim_ == DecayDim::Value ? dv : m;
    forget_ = register_module("forget_proj", std::make_shared<GateProjection>(d_model, heads, size, 0, c.bias_init, gen));
    refine_ = register_module("refine_proj", std::make_shared<GateProjection>(d_model, heads, size, 0, c.bias_init, gen));
  }
  bool decays_value_channels() const override { return dim_ == DecayDim::Value; }
  std::optional<RefinedGateProjections> refined_projections() const override {
    return RefinedGateProjections{
        .forget = forget_->single_linear(), .refine = refine_->single_linear(), .dim = dim_, .floor = floor_};
  }

 private:
  std::vector<const GateProjection*> projections() const override { return {forget_.get(), refine_.get()}; }
  // Fused, the projections' biases go into the gate's kernels rather than passes of their own.
  bool adds_own_biases() const override { return fused_; }
  GateOutput from_preactivations(const std::vector<Tensor>& pre) const override {
    const Tensor log_f = fused_ ? linea::refined_log_gate(pre[0], pre[1], floor_, forget_->head_bias(), refine_->head_bias())
                                : floored(refined_log_gate(pre[0], pre[1]));
    if (dim_ == DecayDim::Value) return {.gk = {}, .gv = log_f, .key_scale = {}};
    return {.gk = log_f, .gv = {}, .key_scale = {}};
  }

  DecayDim dim_;
  bool fused_;
  std::shared_ptr<GateProjection> forget_, refine_;
};

}  // namespace

std::shared_ptr<Gate> make_gate(const GateConfig& config, int64_t d_model, int64_t heads, int64_t feature_dim,
                                int64_t value_dim, Generator& gen) {
  LINEA_CHECK(config.log_decay_floor < 0, "gate", "log_decay_floor must be negative, got ", config.log_decay_floor);
  switch (config.kind) {
    case GateKind::None: return nullptr;
    case GateKind::Scalar: return std::make_shared<ScalarGate>(config, d_model, heads, gen);
    case GateKind::FastDecay:
      return std::make_shared<FastDecayGate>(config, d_model, heads, feature_dim, value_dim, gen);
    case GateKind::GLA: return std::make_shared<GLAGate>(config, d_model, heads, feature_dim, gen);
    case GateKind::ReGLA: return std::make_shared<ReGLAGate>(config, d_model, heads, feature_dim, value_dim, gen);
  }
  fail("gate", "unknown kind");
}

namespace {
const names::Table<GateKind> kGateNames[] = {
    {GateKind::None, "none"}, {GateKind::Scalar, "scalar"}, {GateKind::FastDecay, "fast_decay"},
    {GateKind::GLA, "gla"},   {GateKind::ReGLA, "regla"},
};
const names::Table<DecayDim> kDimNames[] = {{DecayDim::Value, "value"}, {DecayDim::Key, "key"}};
}  // namespace

std::string gate_name(GateKind kind) { return names::name_in(kGateNames, kind); }

// "rfa" names the scalar gate after the paper that introduced it.
GateKind parse_gate(const std::string& name) {
  return name == "rfa" ? GateKind::Scalar : names::parse_in(kGateNames, name, "gate", "gate");
}

std::string decay_dim_name(DecayDim dim) { return names::name_in(kDimNames, dim); }
DecayDim parse_decay_dim(const std::string& name) { return names::parse_in(kDimNames, name, "gate", "decay dim"); }

}  // namespace linea::nn::linear
