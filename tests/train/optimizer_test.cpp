// Optimizers against hand-written reference updates (float64, per element on the host), the
// weight-decay flag, skipped parameters, and state round trips that resume bit for bit.
#include <cmath>
#include <limits>
#include <vector>

#include "tests/test_util.h"
#include "train/adamw.h"
#include "train/sgd.h"

namespace linea::train {
namespace {

using linea::testing::all_close;

// A few parameters of different shapes; the second is excluded from weight decay.
std::vector<NamedParameter> make_params(DType dtype, uint64_t seed) {
  Generator gen(seed);
  std::vector<NamedParameter> params;
  const std::vector<std::pair<std::string, Shape>> specs = {{"w", {3, 4}}, {"norm.weight", {5}}, {"blocks.0.v", {2, 2, 3}}};
  for (size_t i = 0; i < specs.size(); ++i) {
    Tensor t = randn(specs[i].second, dtype, &gen);
    t.requires_grad_(true);
    params.push_back({specs[i].first, t, i != 1});
  }
  return params;
}

// Gradients that depend only on (seed, step), so two runs see the same ones.
void set_grads(const std::vector<NamedParameter>& params, uint64_t seed, int step) {
  Generator gen(seed * 1000 + static_cast<uint64_t>(step));
  for (const NamedParameter& p : params) p.tensor.set_grad(randn(p.tensor.shape(), p.tensor.dtype(), &gen));
}

std::vector<NamedParameter> clone_params(const std::vector<NamedParameter>& params) {
  std::vector<NamedParameter> out;
  for (const NamedParameter& p : params) {
    Tensor t = clone(detach(p.tensor));
    t.requires_grad_(true);
    out.push_back({p.name, t, p.weight_decay});
  }
  return out;
}

// The formulas of the papers, one element at a time.
struct Reference {
  std::vector<double> p, m, v;
};

TEST(AdamW, MatchesReferenceUpdate) {
  const AdamWOptions o{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.3};
  auto params = make_params(kFloat64, 1);
  std::vector<Reference> ref;
  for (const NamedParameter& p : params) {
    const auto values = p.tensor.to_vector<double>();
    ref.push_back({values, std::vector<double>(values.size()), std::vector<double>(values.size())});
  }
  AdamW opt(params, o);
  for (int step = 1; step <= 6; ++step) {
    const double lr = o.lr * step;  // a changing rate exercises set_lr
    opt.set_lr(lr);
    set_grads(params, 7, step);
    opt.step();
    for (size_t i = 0; i < params.size(); ++i) {
      const auto g = params[i].tensor.grad().to_vector<double>();
      Reference& r = ref[i];
      const double wd = params[i].weight_decay ? o.weight_decay : 0.0;
      for (size_t j = 0; j < g.size(); ++j) {
        r.m[j] = o.beta1 * r.m[j] + (1 - o.beta1) * g[j];
        r.v[j] = o.beta2 * r.v[j] + (1 - o.beta2) * g[j] * g[j];
        const double m_hat = r.m[j] / (1 - std::pow(o.beta1, step));
        const double v_hat = r.v[j] / (1 - std::pow(o.beta2, step));
        r.p[j] -= lr * (m_hat / (std::sqrt(v_hat) + o.eps) + wd * r.p[j]);
      }
      EXPECT_TRUE(all_close(params[i].tensor, from_vector(r.p, params[i].tensor.shape()), 0, 1e-12))
          << params[i].name << " at step " << step;
    }
  }
  EXPECT_EQ(opt.steps(), 6);
}

struct SGDCase {
  double momentum;
  bool nesterov;
  double weight_decay;
};

class SGDReference : public ::testing::TestWithParam<SGDCase> {};

TEST_P(SGDReference, MatchesReferenceUpdate) {
  const SGDCase c = GetParam();
  const SGDOptions o{.lr = 0.05, .momentum = c.momentum, .nesterov = c.nesterov, .weight_decay = c.weight_decay};
  auto params = make_params(kFloat64, 2);
  std::vector<Reference> ref;
  for (const NamedParameter& p : params) {
    const auto values = p.tensor.to_vector<double>();
    ref.push_back({values, std::vector<double>(values.size()), {}});
  }
  SGD opt(params, o);
  for (int step = 1; step <= 5; ++step) {
    set_grads(params, 3, step);
    opt.step();
    for (size_t i = 0; i < params.size(); ++i) {
      const auto g = params[i].tensor.grad().to_vector<double>();
      Reference& r = ref[i];
      const double wd = params[i].weight_decay ? o.weight_decay : 0.0;
      for (size_t j = 0; j < g.size(); ++j) {
        double d = g[j] + wd * r.p[j];
        if (o.momentum != 0) {
          r.m[j] = step == 1 ? d : o.momentum * r.m[j] + d;  // PyTorch: the first buffer is d
          d = o.nesterov ? d + o.momentum * r.m[j] : r.m[j];
        }
        r.p[j] -= o.lr * d;
      }
      EXPECT_TRUE(all_close(params[i].tensor, from_vector(r.p, params[i].tensor.shape()), 0, 1e-12))
          << params[i].name << " at step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, SGDReference,
                         ::testing::Values(SGDCase{0.0, false, 0.0}, SGDCase{0.9, false, 0.0}, SGDCase{0.9, true, 0.0},
                                           SGDCase{0.5, true, 0.1}, SGDCase{0.0, false, 0.2}));

// With a zero gradient the Adam move is exactly zero, leaving the decay alone to act.
TEST(AdamW, WeightDecayOnlyWhereFlagged) {
  auto params = make_params(kFloat64, 4);
  const auto before = clone_params(params);
  AdamW opt(params, {.lr = 0.1, .weight_decay = 0.5});
  for (const NamedParameter& p : params) p.tensor.set_grad(zeros_like(p.tensor));
  opt.step();
  for (size_t i = 0; i < params.size(); ++i) {
    const double factor = params[i].weight_decay ? 1.0 - 0.1 * 0.5 : 1.0;
    EXPECT_EQ(max_abs_diff(params[i].tensor, before[i].tensor * factor), 0.0) << params[i].name;
  }
}

// step(s) reads the gradients as s * grad (the clip, folded in) and leaves them as they were: the
// same parameters, bit for bit in float64, as scaling the gradients first and stepping by 1.
template <class Opt, class Options>
void expect_scaled_step_is_step_of_scaled_gradients(Options options) {
  auto folded = make_params(kFloat64, 12);
  auto scaled_first = clone_params(folded);
  Opt a(folded, options), b(scaled_first, options);
  for (int step = 1; step <= 4; ++step) {
    const double scale = 0.37 / step;
    set_grads(folded, 13, step);
    set_grads(scaled_first, 13, step);
    const auto grads_before = folded[0].tensor.grad().to_vector<double>();
    a.step(scale);
    EXPECT_EQ(folded[0].tensor.grad().to_vector<double>(), grads_before) << "the gradients stay unscaled";
    for (const NamedParameter& p : scaled_first) p.tensor.set_grad(p.tensor.grad() * scale);
    b.step();
    for (size_t i = 0; i < folded.size(); ++i)
      EXPECT_EQ(folded[i].tensor.to_vector<double>(), scaled_first[i].tensor.to_vector<double>())
          << folded[i].name << " at step " << step;
  }
  EXPECT_LINEA_ERROR(a.step(std::numeric_limits<double>::quiet_NaN()), "scale", "finite");
}

TEST(AdamW, StepWithAGradientScaleIsAStepOfScaledGradients) {
  expect_scaled_step_is_step_of_scaled_gradients<AdamW>(AdamWOptions{.lr = 0.01, .weight_decay = 0.2});
}

TEST(SGD, StepWithAGradientScaleIsAStepOfScaledGradients) {
  expect_scaled_step_is_step_of_scaled_gradients<SGD>(
      SGDOptions{.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.1});
}

TEST(Optimizer, SkipsParametersWithoutGradient) {
  auto params = make_params(kFloat32, 5);
  const auto before = clone_params(params);
  AdamW opt(params);
  params[0].tensor.set_grad(ones_like(params[0].tensor));
  opt.step();
  EXPECT_GT(max_abs_diff(params[0].tensor, before[0].tensor), 0.0);
  for (size_t i = 1; i < params.size(); ++i) EXPECT_EQ(max_abs_diff(params[i].tensor, before[i].tensor), 0.0);
  const OptimizerState state = opt.state();
  EXPECT_EQ(state.scalars.at("step.w"), 1.0);
  EXPECT_EQ(state.scalars.at("step.norm.weight"), 0.0);
  EXPECT_EQ(state.scalars.at("step"), 1.0);
}

TEST(Optimizer, StateLivesWithTheParameter) {
  auto params = make_params(kFloat64, 6);
  AdamW opt(params);
  const OptimizerState state = opt.state();
  EXPECT_EQ(state.type, "adamw");
  ASSERT_EQ(state.tensors.size(), 6u);
  const Tensor& m = state.tensors.at("exp_avg.blocks.0.v");
  EXPECT_EQ(m.dtype(), kFloat64);
  EXPECT_EQ(m.shape(), (Shape{2, 2, 3}));
  EXPECT_TRUE(state.tensors.count("exp_avg_sq.norm.weight"));
  EXPECT_TRUE(SGD(make_params(kFloat32, 6)).state().tensors.empty());  // plain SGD keeps nothing
}

TEST(Optimizer, ZeroGradDropsGradients) {
  auto params = make_params(kFloat32, 7);
  SGD opt(params);
  set_grads(params, 1, 1);
  opt.zero_grad();
  for (const NamedParameter& p : params) EXPECT_FALSE(p.tensor.grad().defined());
}

TEST(Optimizer, StepsWhileGradModeIsOn) {
  auto params = make_params(kFloat32, 8);
  SGD opt(params, {.lr = 0.1, .momentum = 0.9});
  set_grads(params, 1, 1);
  ASSERT_TRUE(is_grad_enabled());
  EXPECT_NO_THROW(opt.step());
  EXPECT_TRUE(is_grad_enabled());
}

// Save after k steps, restore into a fresh optimizer over fresh copies of the parameters, go on:
// the parameters must equal those of a run that never stopped, bit for bit.
template <class Opt, class Options>
void expect_bitwise_resume(Options options) {
  const int k = 3, n = 4;
  auto straight = make_params(kFloat32, 9);
  Opt uninterrupted(straight, options);
  for (int step = 1; step <= k + n; ++step) {
    uninterrupted.set_lr(0.01 / step);
    set_grads(straight, 11, step);
    uninterrupted.step();
  }

  auto first = make_params(kFloat32, 9);
  Opt before(first, options);
  for (int step = 1; step <= k; ++step) {
    before.set_lr(0.01 / step);
    set_grads(first, 11, step);
    before.step();
  }
  OptimizerState saved = before.state();
  for (auto& [name, t] : saved.tensors) t = clone(t);  // state() gives aliases

  auto resumed = clone_params(first);
  Opt after(resumed, options);
  after.load_state(saved);
  EXPECT_EQ(after.steps(), k);
  EXPECT_EQ(after.lr(), 0.01 / k);
  for (int step = k + 1; step <= k + n; ++step) {
    after.set_lr(0.01 / step);
    set_grads(resumed, 11, step);
    after.step();
  }
  for (size_t i = 0; i < straight.size(); ++i)
    EXPECT_EQ(resumed[i].tensor.to_vector<float>(), straight[i].tensor.to_vector<float>()) << straight[i].name;
}

TEST(AdamW, StateRoundTripResumesBitwise) { expect_bitwise_resume<AdamW>(AdamWOptions{.weight_decay = 0.1}); }
TEST(SGD, StateRoundTripResumesBitwise) { expect_bitwise_resume<SGD>(SGDOptions{.momentum = 0.9, .nesterov = true}); }

TEST(Optimizer, LoadStateRejectsMismatchesAndChangesNothing) {
  auto params = make_params(kFloat64, 10);
  AdamW opt(params);
  set_grads(params, 1, 1);
  opt.step();
  const OptimizerState good = opt.state();
  auto with = [&](auto edit) {
    OptimizerState s = good;
    edit(s);
    return s;
  };
  AdamW fresh(clone_params(params));
  EXPECT_LINEA_ERROR(fresh.load_state(with([](OptimizerState& s) { s.type = "sgd"; })), "'sgd'", "'adamw'");
  EXPECT_LINEA_ERROR(fresh.load_state(with([](OptimizerState& s) { s.tensors.erase("exp_avg.w"); })), "exp_avg.w");
  EXPECT_LINEA_ERROR(fresh.load_state(with([](OptimizerState& s) { s.tensors["exp_avg.w"] = zeros({4, 3}, kFloat64); })),
                     "exp_avg.w", "[4, 3]");
  EXPECT_LINEA_ERROR(fresh.load_state(with([](OptimizerState& s) { s.tensors["exp_avg.nope"] = zeros({1}); })),
                     "unexpected tensor 'exp_avg.nope'");
  EXPECT_LINEA_ERROR(fresh.load_state(with([](OptimizerState& s) { s.scalars["step.w"] = 1.5; })), "step.w", "count");
  EXPECT_LINEA_ERROR(fresh.load_state(with([](OptimizerState& s) { s.scalars.erase("lr"); })), "'lr'");
  EXPECT_LINEA_ERROR(fresh.load_state(with([](OptimizerState& s) { s.scalars["lr"] = NAN; })), "'lr'");
  EXPECT_LINEA_ERROR(fresh.load_state(with([](OptimizerState& s) { s.scalars["momentum"] = 0.9; })), "'momentum'");
  // A state that failed to load left the fresh optimizer untouched.
  EXPECT_EQ(fresh.steps(), 0);
  for (const auto& [name, t] : fresh.state().tensors) EXPECT_EQ(max_abs_diff(t, zeros_like(t)), 0.0) << name;
}

TEST(Optimizer, RejectsBadParametersAndOptions) {
  auto params = make_params(kFloat32, 12);
  auto twice = params;
  twice.push_back({"again", params[0].tensor, true});
  EXPECT_LINEA_ERROR(AdamW{twice}, "'again'", "already given");
  auto renamed = make_params(kFloat32, 12);
  renamed[1].name = renamed[0].name;
  EXPECT_LINEA_ERROR(AdamW{renamed}, "'w'", "twice");
  EXPECT_LINEA_ERROR((AdamW{params, {.beta1 = 1.0}}), "betas");
  EXPECT_LINEA_ERROR((SGD{params, {.nesterov = true}}), "Nesterov");
  AdamW opt(params);
  EXPECT_LINEA_ERROR(opt.set_lr(-1.0), "learning rate");
  EXPECT_LINEA_ERROR(opt.set_lr(INFINITY), "learning rate");
}

}  // namespace
}  // namespace linea::train
