// The fused decoding step on the GPU (cuda/kernels/linear_step.cu) against the CPU kernel, the
// oracle: the op at awkward sizes (a single channel; widths above the block's 256 threads; more
// value rows than warps; q/k and v widths apart) with every option, on strided views, with NaN
// inputs; and LinearAttention's fused step on the GPU against the same layer on the CPU for every
// configuration it covers (tests/nn/fused_step_configs.h).
#include <limits>
#include <memory>
#include <string>

#include "nn/linear_attention/linear_attention.h"
#include "tests/cuda/parity.h"
#include "tests/nn/fused_step_configs.h"

namespace linea::testing {
namespace {

struct Sizes {
  int64_t B, H, dk, dv;
};

struct Case {
  StepFeatureMap map;
  bool refined, on_keys, gk, gk_scalar, gv, norm, key_max;
  bool key_gate = false, value_gate = false;  // log-sigmoid gates from pre-activations
  double normalizer = 1.0;
};

// Random inputs of a case, float64 on the CPU.
LinearStepInputs inputs_for(const Sizes& s, const Case& c, Generator& gen) {
  LinearStepInputs in;
  in.q = randn({s.B, s.H, s.dk}, kFloat64, &gen);
  in.k = randn({s.B, s.H, s.dk}, kFloat64, &gen) * 2.0;
  in.v = randn({s.B, s.H, s.dv}, kFloat64, &gen);
  if (c.gk) in.gk = -abs(randn({s.B, s.H, c.gk_scalar ? 1 : s.dk}, kFloat64, &gen));
  if (c.gv) in.gv = -abs(randn({s.B, s.H, s.dv}, kFloat64, &gen));
  if (c.refined) {
    const int64_t w = c.on_keys ? s.dk : s.dv;
    in.gate_a = randn({s.B, s.H, w}, kFloat64, &gen) * 3.0;
    in.gate_c = randn({s.B, s.H, w}, kFloat64, &gen);
    in.gate_bias_a = randn({s.H * w}, kFloat64, &gen);
    in.gate_bias_c = randn({s.H * w}, kFloat64, &gen);
  }
  if (c.key_gate) {
    in.key_gate = randn({s.B, s.H, s.dk}, kFloat64, &gen) * 4.0;
    in.key_gate_bias = randn({s.H * s.dk}, kFloat64, &gen);
  }
  if (c.value_gate) {
    in.value_gate = randn({s.B, s.H, s.dv}, kFloat64, &gen) * 4.0;
    in.value_gate_bias = randn({s.H * s.dv}, kFloat64, &gen);
  }
  if (c.key_max) in.key_max = randn({s.B, s.H, 1, 1}, kFloat64, &gen);
  in.state = randn({s.B, s.H, s.dv, s.dk}, kFloat64, &gen);
  if (c.norm) in.norm_weight = randn({s.dv}, kFloat64, &gen);
  return in;
}

// t's values as `dtype` on `device` in a view with a gap after every row.
Tensor gapped_copy(const Tensor& t, DType dtype, Device device) {
  const Tensor wide = zeros({t.size(0), t.size(1), t.size(2) + 1}, {dtype, device});
  Tensor rows = narrow(wide, 2, 1, t.size(2));
  NoGradGuard no_grad;
  copy_(rows, t);
  return rows;
}

// Every defined member as `dtype` on `device`, q a view with gaps between its rows.
LinearStepInputs moved(const LinearStepInputs& in, DType dtype, Device device) {
  auto m = [&](const Tensor& t) { return t.defined() ? to(to(t, dtype), device) : t; };
  return {gapped_copy(in.q, dtype, device), m(in.k), m(in.v), m(in.gk), m(in.gv), m(in.gate_a), m(in.gate_c),
          m(in.gate_bias_a), m(in.gate_bias_c), m(in.key_gate), m(in.value_gate), m(in.key_gate_bias),
          m(in.value_gate_bias), m(in.key_max), m(in.state), m(in.norm_weight)};
}

::testing::AssertionResult results_match(const LinearStepResult& gpu, const LinearStepResult& cpu) {
  const double tol = parity_rtol(cpu.out.dtype()) * 10;
  if (auto r = matches_cpu(gpu.out, cpu.out, tol, tol); !r) return r << " (out)";
  if (auto r = matches_cpu(gpu.state, cpu.state, tol, tol); !r) return r << " (state)";
  if (cpu.key_max.defined()) return matches_cpu(gpu.key_max, cpu.key_max, 0, 0) << " (key max)";
  return ::testing::AssertionSuccess();
}

TEST(LinearStepCuda, OpMatchesTheCpuAtAwkwardSizesWithEveryOption) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Sizes sizes[] = {{1, 1, 1, 1}, {3, 5, 48, 100}, {2, 3, 100, 16}, {1, 8, 64, 64}, {2, 2, 300, 17}};
  const Case cases[] = {
      {StepFeatureMap::NormalizedExp, true, false, false, false, false, true, true},  // ReGLA
      {StepFeatureMap::NormalizedExp, true, false, false, false, false, true, false},  // its first token
      {StepFeatureMap::NormalizedExp, true, true, true, true, false, false, true},     // key-dim gate, scalar gk
      {StepFeatureMap::Identity, false, false, true, false, false, true, false},       // given decays
      {StepFeatureMap::Identity, false, false, true, false, true, true, false},        // given, both sides
      {StepFeatureMap::Identity, false, false, false, false, false, true, false, true, false, 16.0},  // GLA
      {StepFeatureMap::Identity, false, false, false, false, false, true, false, true, true},         // Fast Decay
      {StepFeatureMap::Identity, false, false, false, false, false, false, false},     // no gate, no norm
  };
  Generator gen(71);
  for (const Sizes& s : sizes)
    for (const Case& c : cases)
      for (DType dtype : {kFloat64, kFloat32}) {
        const LinearStepInputs in = inputs_for(s, c, gen);
        const LinearStepOptions options{.map = c.map, .refined_gate_on_keys = c.on_keys, .scale = 0.3,
                                        .gate_floor = -4.0, .gate_normalizer = c.normalizer, .output_norm = c.norm,
                                        .norm_eps = 1e-6};
        NoGradGuard no_grad;
        const LinearStepResult cpu = linear_attention_step(moved(in, dtype, kCPU), options);
        const LinearStepResult on_device = linear_attention_step(moved(in, dtype, gpu()), options);
        EXPECT_TRUE(results_match(on_device, cpu)) << "B=" << s.B << " H=" << s.H << " dk=" << s.dk << " dv=" << s.dv
                                             << " " << dtype_name(dtype) << " case " << (&c - cases);
      }
}

TEST(LinearStepCuda, InPlaceMatchesTheCpuAndWritesOverTheGivenState) {
  // The kernel reads every element of the state and the key max before it writes it.
  LINEA_SKIP_WITHOUT_CUDA();
  const Case regla{StepFeatureMap::NormalizedExp, true, false, false, false, false, true, true};
  const Case gla{StepFeatureMap::Identity, false, false, false, false, false, true, false, true, false, 16.0};
  Generator gen(79);
  for (const Sizes& s : {Sizes{3, 5, 48, 100}, Sizes{1, 8, 64, 64}, Sizes{2, 2, 300, 17}})
    for (const Case& c : {regla, gla})
      for (DType dtype : {kFloat64, kFloat32}) {
        const LinearStepInputs in = inputs_for(s, c, gen);
        const LinearStepOptions options{.map = c.map, .scale = 0.3, .gate_floor = -4.0,
                                        .gate_normalizer = c.normalizer, .output_norm = c.norm};
        NoGradGuard no_grad;
        const LinearStepResult cpu = linear_attention_step(moved(in, dtype, kCPU), options);
        const LinearStepInputs on_device = moved(in, dtype, gpu());
        const LinearStepResult r = linear_attention_step(on_device, options, StateWrite::InPlace);
        EXPECT_EQ(r.state.raw_data(), on_device.state.raw_data());
        if (c.key_max) EXPECT_EQ(r.key_max.raw_data(), on_device.key_max.raw_data());
        EXPECT_TRUE(results_match(r, cpu)) << "B=" << s.B << " H=" << s.H << " dk=" << s.dk << " dv=" << s.dv << " "
                                           << dtype_name(dtype);
      }
}

TEST(LinearStepCuda, NanInputsGiveNanAsOnTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  Generator gen(73);
  const Case regla{StepFeatureMap::NormalizedExp, true, false, false, false, false, true, true};
  LinearStepInputs in = inputs_for({2, 2, 9, 5}, regla, gen);
  {
    NoGradGuard no_grad;
    Tensor k = contiguous(in.k);
    Tensor one_key = narrow(narrow(k, 0, 1, 1), 2, 3, 1);
    fill_(one_key, std::numeric_limits<double>::quiet_NaN());
    in.k = k;
    const LinearStepResult cpu = linear_attention_step(in, {.map = StepFeatureMap::NormalizedExp, .output_norm = true});
    const LinearStepResult on_device =
        linear_attention_step(moved(in, kFloat64, gpu()), {.map = StepFeatureMap::NormalizedExp, .output_norm = true});
    EXPECT_TRUE(std::isnan(cpu.key_max.to_vector<double>()[2])) << "a NaN key makes its running max NaN";
    EXPECT_TRUE(results_match(on_device, cpu));
  }
}

TEST(LinearStepCuda, LayerStepsMatchTheCpuForEveryCoveredConfig) {
  LINEA_SKIP_WITHOUT_CUDA();
  // Exact float32 products: with TF32 the projections differ from the CPU's by about 1e-3, which
  // the exponential feature map carries into the outputs.
  Tf32Setting exact(false);
  for (DType dtype : {kFloat64, kFloat32}) {
    for (const auto& [name, config] : fused_step_configs(40, 3, 33, 48)) {
      std::unique_ptr<nn::linear::LinearAttention> layers[2];
      for (int d = 0; d < 2; ++d) {
        Generator init(43), redraw(44);
        layers[d] = std::make_unique<nn::linear::LinearAttention>(config, init);
        perturb_parameters(*layers[d], redraw);
        layers[d]->to(dtype);
        if (d == 1) layers[d]->to(gpu());
      }
      Generator data(45);
      const Tensor x = to(randn({3, 5, 40}, kFloat64, &data), dtype);
      NoGradGuard no_grad;
      auto cpu_state = layers[0]->init_state(3), gpu_state = layers[1]->init_state(3);
      for (int64_t t = 0; t < x.size(1); ++t) {
        const Tensor token = select(x, 1, t);
        const Tensor expected = layers[0]->step(token, *cpu_state);
        const Tensor got = layers[1]->step(on_gpu(token), *gpu_state);
        const double tol = parity_rtol(dtype) * 20;
        EXPECT_TRUE(matches_cpu(got, expected, tol, tol)) << name << " " << dtype_name(dtype) << ", token " << t;
      }
    }
  }
}

}  // namespace
}  // namespace linea::testing
