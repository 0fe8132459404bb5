// The fused decoding step of LinearAttention (linea::linear_attention_step and
// nn/layers/stacked_projection.h) against the composite step it replaces and against the parallel
// form, for every configuration it covers (tests/nn/fused_step_configs.h): outputs, states and
// running key max, token by token, from a fresh state and after a prefill; float64 to 1e-12,
// float32 to rounding. Also: weights changed in place or given a LoRA adapter are seen, grad
// mode keeps the differentiable composite step, and the op's bad inputs are named errors.
#include <memory>

#include "nn/linear_attention/linear_attention.h"
#include "tests/nn/fused_step_configs.h"
#include "tests/test_util.h"

namespace linea::testing {
namespace {

using nn::linear::LinearAttention;
using nn::linear::LinearAttentionConfig;
using nn::linear::LinearAttentionState;

constexpr int64_t kD = 11, kHeads = 3, kHeadDim = 7, kKeyDim = 5;

// Two layers with one set of weights: fused_step on and off.
struct Pair {
  std::unique_ptr<LinearAttention> fused, composite;
};

Pair make_pair(LinearAttentionConfig c, DType dtype, uint64_t seed) {
  Pair p;
  for (bool on : {true, false}) {
    c.fused_step = on;
    Generator init(seed), redraw(seed + 1);
    auto layer = std::make_unique<LinearAttention>(c, init);
    perturb_parameters(*layer, redraw);
    layer->to(dtype);
    (on ? p.fused : p.composite) = std::move(layer);
  }
  return p;
}

double tolerance(DType dtype) { return dtype == kFloat64 ? 1e-12 : 2e-5; }

// Steps both layers through x (B, T, D) from their states, checking every token's output, state
// and key max.
void expect_same_steps(Pair& p, const Tensor& x, nn::DecodeState& fused_state, nn::DecodeState& composite_state,
                       const std::string& name) {
  NoGradGuard no_grad;
  const double tol = tolerance(x.dtype());
  auto& fs = dynamic_cast<LinearAttentionState&>(fused_state);
  auto& cs = dynamic_cast<LinearAttentionState&>(composite_state);
  for (int64_t t = 0; t < x.size(1); ++t) {
    const Tensor token = select(x, 1, t);
    const Tensor a = p.fused->step(token, fused_state), b = p.composite->step(token, composite_state);
    EXPECT_TRUE(all_close(a, b, tol, tol)) << name << ", token " << t << ": output";
    EXPECT_TRUE(all_close(fs.state, cs.state, tol, tol)) << name << ", token " << t << ": state";
    EXPECT_EQ(fs.key_max.defined(), cs.key_max.defined()) << name;
    if (fs.key_max.defined()) EXPECT_TRUE(all_close(fs.key_max, cs.key_max, tol, tol)) << name << ", token " << t;
    EXPECT_EQ(fs.position, cs.position);
  }
}

TEST(LinearStep, FusedEqualsCompositeFromAFreshStateAndAfterAPrefill) {
  for (DType dtype : {kFloat64, kFloat32}) {
    for (const auto& [name, config] : fused_step_configs(kD, kHeads, kHeadDim, kKeyDim)) {
      Pair p = make_pair(config, dtype, 17);
      Generator data(5);
      const Tensor x = to(randn({2, 6, kD}, kFloat64, &data), dtype);
      auto fs = p.fused->init_state(2), cs = p.composite->init_state(2);
      expect_same_steps(p, x, *fs, *cs, name + " fresh");

      const Tensor prompt = to(randn({2, 9, kD}, kFloat64, &data), dtype);
      auto fp = p.fused->init_state(2), cp = p.composite->init_state(2);
      {
        NoGradGuard no_grad;
        p.fused->prefill(prompt, *fp);
        p.composite->prefill(prompt, *cp);
      }
      expect_same_steps(p, x, *fp, *cp, name + " after prefill");
    }
  }
}

TEST(LinearStep, FusedStepsEqualTheParallelForm) {
  for (const auto& [name, config] : fused_step_configs(kD, kHeads, kHeadDim, kKeyDim)) {
    Pair p = make_pair(config, kFloat64, 23);
    Generator data(9);
    const Tensor x = randn({2, 17, kD}, kFloat64, &data);
    NoGradGuard no_grad;
    const Tensor parallel = p.fused->forward(x);
    auto state = p.fused->init_state(2);
    for (int64_t t = 0; t < x.size(1); ++t)
      EXPECT_TRUE(all_close(p.fused->step(select(x, 1, t), *state), select(parallel, 1, t), 1e-9, 1e-9))
          << name << ", token " << t;
  }
}

TEST(LinearStep, WeightsChangedInPlaceOrAdaptedAreSeen) {
  auto configs = fused_step_configs(kD, kHeads, kHeadDim, kKeyDim);
  Pair p = make_pair(configs[0].config, kFloat64, 31);
  Generator data(13);
  const Tensor x = randn({1, 3, kD}, kFloat64, &data);
  auto fs = p.fused->init_state(1), cs = p.composite->init_state(1);
  expect_same_steps(p, x, *fs, *cs, "before");  // the stack is built here
  // The same change to both layers' q and gate projections, in place: the stack must notice.
  {
    NoGradGuard no_grad;
    for (LinearAttention* layer : {p.fused.get(), p.composite.get()}) {
      Generator change(3);
      for (auto& param : layer->named_parameters())
        if (param.name.find("q_proj") != std::string::npos || param.name.find("forget_proj") != std::string::npos) {
          Tensor t = param.tensor;
          add_(t, randn(t.shape(), kFloat64, &change));
        }
    }
  }
  expect_same_steps(p, x, *fs, *cs, "after an in-place change");
  // A LoRA adapter on a stacked projection: the parts then run one by one.
  for (LinearAttention* layer : {p.fused.get(), p.composite.get()}) {
    Generator lora(4);
    for (auto& [name, module] : layer->named_children())
      if (name == "k_proj") {
        auto* linear = dynamic_cast<nn::Linear*>(module.get());
        linear->add_lora(2, 4.0, lora);
        perturb_parameters(*linear, lora);  // B starts at zero: give the adapter an effect
      }
  }
  expect_same_steps(p, x, *fs, *cs, "with a LoRA adapter");
}

TEST(LinearStep, GradModeKeepsTheDifferentiableCompositeStep) {
  Pair p = make_pair(fused_step_configs(kD, kHeads, kHeadDim, kKeyDim)[0].config, kFloat64, 37);
  Generator data(15);
  const Tensor x = randn({2, kD}, kFloat64, &data);
  auto state = p.fused->init_state(2);
  const Tensor y = p.fused->step(x, *state);
  EXPECT_TRUE(y.requires_grad()) << "a step with grad mode on must stay differentiable";
  backward(sum(y));
  EXPECT_TRUE(p.fused->named_parameters()[0].tensor.grad().defined());
}

// Valid inputs of the op for B = 2, H = 3, dk = 4, dv = 5, the refined gate on the value dim.
LinearStepInputs valid_inputs(Generator& gen) {
  LinearStepInputs in;
  in.q = randn({2, 3, 4}, kFloat64, &gen);
  in.k = randn({2, 3, 4}, kFloat64, &gen);
  in.v = randn({2, 3, 5}, kFloat64, &gen);
  in.gate_a = randn({2, 3, 5}, kFloat64, &gen);
  in.gate_c = randn({2, 3, 5}, kFloat64, &gen);
  in.gate_bias_a = randn({15}, kFloat64, &gen);
  in.key_max = randn({2, 3, 1, 1}, kFloat64, &gen);
  in.state = randn({2, 3, 5, 4}, kFloat64, &gen);
  in.norm_weight = randn({5}, kFloat64, &gen);
  return in;
}

TEST(LinearStep, OpMatchesItsContractOnStridedInputs) {
  // The op on views with gaps between rows equals a direct evaluation of the contract.
  Generator gen(19);
  LinearStepInputs in = valid_inputs(gen);
  const Tensor wide = randn({2, 3, 9}, kFloat64, &gen);
  in.q = narrow(wide, 2, 1, 4);  // rows 9 apart
  in.gk = randn({2, 3, 1}, kFloat64, &gen) - 1.0;  // a scalar key decay
  const LinearStepOptions options{.map = StepFeatureMap::NormalizedExp, .scale = 0.7, .gate_floor = -3.0,
                                  .output_norm = true, .norm_eps = 1e-5};
  NoGradGuard no_grad;
  const LinearStepResult r = linear_attention_step(in, options);

  const Tensor q = in.q, k = in.k;
  const Tensor q_features = exp(q - amax(q, {2}, true)) * 0.7;
  const Tensor m = maximum(amax(k, {2}, true), view(in.key_max, {2, 3, 1}));
  const Tensor k_features = exp(k - m);
  const Tensor lambda = view(in.key_max, {2, 3, 1}) - m;
  const Tensor gate = clamp(nn::linear::refined_log_gate(in.gate_a + view(in.gate_bias_a, {3, 5}), in.gate_c), -3.0,
                            std::nullopt);
  const Tensor decay_k = exp(in.gk + lambda), decay_v = exp(gate);                   // (2, 3, 1), (2, 3, 5)
  const Tensor s = unsqueeze(decay_v, 3) * in.state * unsqueeze(decay_k, 3) +
                   unsqueeze(in.v, 3) * unsqueeze(k_features, 2);                     // (2, 3, 5, 4)
  const Tensor o = sum(s * unsqueeze(q_features, 2), {3});                             // (2, 3, 5)
  const Tensor y = o / sqrt(mean(o * o, {2}, true) + 1e-5) * in.norm_weight;
  EXPECT_TRUE(all_close(r.state, s, 1e-13, 1e-13));
  EXPECT_TRUE(all_close(r.out, y, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(r.key_max, view(m, {2, 3, 1, 1}), 0, 0));
}

TEST(LinearStep, InPlaceWritesTheSameValuesOverTheGivenState) {
  Generator gen(29);
  const LinearStepOptions regla{.map = StepFeatureMap::NormalizedExp, .scale = 0.4, .output_norm = true};
  NoGradGuard no_grad;
  for (bool first_token : {false, true}) {
    LinearStepInputs in = valid_inputs(gen);
    if (first_token) in.key_max = Tensor();  // none yet: a new one is made
    const Tensor state_before = clone(in.state), key_max_before = in.key_max.defined() ? clone(in.key_max) : Tensor();
    LinearStepInputs fresh = in;
    fresh.state = state_before;
    fresh.key_max = key_max_before;
    const LinearStepResult expected = linear_attention_step(fresh, regla);
    const LinearStepResult r = linear_attention_step(in, regla, StateWrite::InPlace);
    EXPECT_EQ(r.state.raw_data(), in.state.raw_data());
    EXPECT_TRUE(all_close(in.state, expected.state, 0, 0)) << "the given state holds the new one";
    EXPECT_TRUE(all_close(r.out, expected.out, 0, 0));
    EXPECT_TRUE(all_close(r.key_max, expected.key_max, 0, 0));
    if (!first_token) EXPECT_EQ(r.key_max.raw_data(), in.key_max.raw_data());
    EXPECT_FALSE(all_close(in.state, state_before, 1e-3, 1e-3)) << "the step changed the state";
  }
}

TEST(LinearStep, InPlaceRefusesAStateItCannotWriteOver) {
  Generator gen(31);
  const LinearStepOptions regla{.map = StepFeatureMap::NormalizedExp, .output_norm = true};
  NoGradGuard no_grad;
  {
    LinearStepInputs in = valid_inputs(gen);
    in.state = transpose(randn({2, 3, 4, 5}, kFloat64, &gen), 2, 3);  // (2, 3, 5, 4), not contiguous
    EXPECT_LINEA_ERROR(linear_attention_step(in, regla, StateWrite::InPlace), "linear_attention_step",
                       "updates the state in place only in a contiguous tensor");
  }
  {
    LinearStepInputs in = valid_inputs(gen);
    in.key_max = narrow(randn({2, 3, 1, 2}, kFloat64, &gen), 3, 1, 1);  // every other element
    EXPECT_LINEA_ERROR(linear_attention_step(in, regla, StateWrite::InPlace),
                       "updates the key max in place only in a contiguous tensor");
  }
}

TEST(LinearStep, TheLayersFusedStepKeepsItsStateInOnePlace) {
  // Decoding allocates nothing for the state, and a captured step needs no copy back.
  for (const auto& [name, config] : fused_step_configs(kD, kHeads, kHeadDim, kKeyDim)) {
    Pair p = make_pair(config, kFloat64, 37);
    Generator data(11);
    const Tensor x = randn({2, 4, kD}, kFloat64, &data);
    auto state = p.fused->init_state(2);
    auto& s = dynamic_cast<LinearAttentionState&>(*state);
    const void* where = s.state.raw_data();
    NoGradGuard no_grad;
    for (int64_t t = 0; t < x.size(1); ++t) p.fused->step(select(x, 1, t), *state);
    EXPECT_EQ(s.state.raw_data(), where) << name;
  }
}

TEST(LinearStep, BadInputsAreNamedErrors) {
  Generator gen(21);
  const LinearStepOptions regla{.map = StepFeatureMap::NormalizedExp, .output_norm = true};
  NoGradGuard no_grad;
  {
    LinearStepInputs in = valid_inputs(gen);
    in.k = randn({2, 3, 6}, kFloat64, &gen);
    EXPECT_LINEA_ERROR(linear_attention_step(in, regla), "linear_attention_step", "k must have width 4");
  }
  {
    LinearStepInputs in = valid_inputs(gen);
    in.state = randn({2, 3, 4, 5}, kFloat64, &gen);
    EXPECT_LINEA_ERROR(linear_attention_step(in, regla), "state must have shape [2, 3, 5, 4]");
  }
  {
    LinearStepInputs in = valid_inputs(gen);
    in.v = randn({2, 3, 5}, kFloat32, &gen);
    EXPECT_LINEA_ERROR(linear_attention_step(in, regla), "linear_attention_step", "float32");
  }
  {
    LinearStepInputs in = valid_inputs(gen);
    in.gate_c = Tensor();
    EXPECT_LINEA_ERROR(linear_attention_step(in, regla), "both pre-activations");
  }
  {
    LinearStepInputs in = valid_inputs(gen);
    EXPECT_LINEA_ERROR(linear_attention_step(in, LinearStepOptions{.output_norm = true}),
                       "running key max only goes with the normalized exp map");
  }
  {
    LinearStepInputs in = valid_inputs(gen);
    in.gate_bias_a = randn({5}, kFloat64, &gen);
    EXPECT_LINEA_ERROR(linear_attention_step(in, regla), "gate_bias_a must have shape [15]");
  }
  {
    LinearStepInputs in = valid_inputs(gen);
    in.q = randn({2, 4}, kFloat64, &gen);
    EXPECT_LINEA_ERROR(linear_attention_step(in, regla), "q must be (B, H, dk)");
  }
}

TEST(LinearStep, RefusesInputsThatRequireGradWhileGradModeIsOn) {
  Generator gen(27);
  LinearStepInputs in = valid_inputs(gen);
  in.q = in.q.requires_grad_();
  EXPECT_LINEA_ERROR(linear_attention_step(in, {.map = StepFeatureMap::NormalizedExp, .output_norm = true}),
                     "has no backward");
}

}  // namespace
}  // namespace linea::testing
