// Gradient-check rows of the basic layers (nn/layers/): each module w.r.t. its input and all its
// parameters, in float64, on small shapes that still exercise broadcasting over leading dims,
// non-contiguous inputs, decoding shapes and states.
#include "nn/gradcheck_cases.h"
#include "nn/gradcheck_module.h"
#include "nn/init.h"
#include "nn/layers/conv1d.h"
#include "nn/layers/dropout.h"
#include "nn/layers/embedding.h"
#include "nn/layers/mlp.h"
#include "nn/layers/norm.h"
#include "nn/layers/rope.h"

namespace linea::nn {

namespace {

using Cases = std::vector<gradcheck::Case>;
using Inputs = std::vector<Tensor>;

// The common row: the module applied to its single input.
template <class Build>
void add_unary(Cases& cases, const std::string& name, Build build, const Shape& shape, double scale = 1.0) {
  cases.push_back(module_case(name, build, inputs_of({shape}, scale), [](auto& m, const Inputs& x) { return m.forward(x[0]); }));
}

void add_linear_cases(Cases& cases) {
  add_unary(cases, "Linear/bias", [](Generator& g) { return std::make_shared<Linear>(4, 3, g); }, {2, 5, 4});
  add_unary(cases, "Linear/vector_input", [](Generator& g) { return std::make_shared<Linear>(4, 3, g); }, {4});
  // The input arrives transposed, so the product reads a strided x.
  cases.push_back(module_case(
      "Linear/no_bias_transposed_input",
      [](Generator& g) { return std::make_shared<Linear>(4, 3, g, LinearOptions{.bias = false}); }, inputs_of({{4, 6}}),
      [](Linear& m, const Inputs& x) { return m.forward(transpose(x[0], 0, 1)); }));
  // LoRA: W, b, the adapter's A and B and the input. B is drawn at random (it starts at zero,
  // which would leave A's gradient zero and unchecked).
  cases.push_back(module_case(
      "Linear/lora",
      [](Generator& g) {
        auto m = std::make_shared<Linear>(5, 3, g);
        m->add_lora(2, 3.0, g);
        init::normal_(m->lora->B, 0.0, 0.5, g);
        return m;
      },
      inputs_of({{2, 4, 5}}), [](Linear& m, const Inputs& x) { return m.forward(x[0]); }));
  // A repeated id: its row's gradient is the sum of both uses.
  const Tensor ids = from_vector(std::vector<int64_t>{1, 4, 1, 6, 0, 4}, {2, 3});
  cases.push_back(module_case(
      "Embedding/repeated_ids", [](Generator& g) { return std::make_shared<Embedding>(7, 3, g, 1.0); }, inputs_of({}),
      [ids](Embedding& m, const Inputs&) { return m.forward(ids); }));
}

void add_norm_cases(Cases& cases) {
  add_unary(cases, "LayerNorm/affine", [](Generator&) { return std::make_shared<LayerNorm>(5); }, {2, 3, 5}, 2.0);
  add_unary(cases, "LayerNorm/no_affine", [](Generator&) { return std::make_shared<LayerNorm>(6, 1e-5, false); },
            {4, 6});
  add_unary(cases, "RMSNorm/weight", [](Generator&) { return std::make_shared<RMSNorm>(5); }, {2, 3, 5}, 2.0);
  add_unary(cases, "RMSNorm/no_weight", [](Generator&) { return std::make_shared<RMSNorm>(6, 1e-6, false); }, {4, 6});
  struct HeadCase {
    std::string name;
    HeadNormOptions options;
    Shape shape;
  };
  const std::vector<HeadCase> heads = {
      {"HeadNorm/rms_shared", {NormKind::RMS, HeadNormWeight::Shared}, {2, 3, 2, 4}},
      {"HeadNorm/layer_per_channel", {NormKind::Layer, HeadNormWeight::PerChannel}, {2, 3, 2, 4}},
      {"HeadNorm/layer_shared_decode", {NormKind::Layer, HeadNormWeight::Shared}, {3, 2, 4}},
      {"HeadNorm/rms_per_channel_decode", {NormKind::RMS, HeadNormWeight::PerChannel}, {3, 2, 4}},
  };
  for (const HeadCase& c : heads)
    add_unary(cases, c.name, [o = c.options](Generator&) { return std::make_shared<HeadNorm>(2, 4, o); }, c.shape);
}

void add_feedforward_cases(Cases& cases) {
  // The generator is reseeded inside f: gradcheck needs the same mask at every evaluation.
  cases.push_back(module_case(
      "Dropout/p0.3", [](Generator&) { return std::make_shared<Dropout>(0.3, std::make_shared<Generator>(0)); },
      inputs_of({{4, 5}}), [](Dropout& m, const Inputs& x) {
        m.generator()->manual_seed(11);
        return m.forward(x[0]);
      }));
  add_unary(cases, "MLP/gelu", [](Generator& g) { return std::make_shared<MLP>(3, 5, g); }, {2, 2, 3});
  add_unary(cases, "MLP/silu_no_bias",
            [](Generator& g) { return std::make_shared<MLP>(3, 5, g, MLPOptions{.activation = Activation::Silu, .bias = false}); },
            {4, 3});
  add_unary(cases, "GatedMLP/geglu_tanh",
            [](Generator& g) { return std::make_shared<GatedMLP>(3, 4, g, MLPOptions{.activation = Activation::GeluTanh}); },
            {2, 2, 3});
  add_unary(cases, "GatedMLP/swiglu",
            [](Generator& g) { return std::make_shared<GatedMLP>(3, 4, g, MLPOptions{.activation = Activation::Silu}); },
            {3, 3});
}

void add_position_cases(Cases& cases) {
  add_unary(cases, "RoPE/full", [](Generator&) { return std::make_shared<RoPE>(4); }, {2, 2, 5, 4});
  cases.push_back(module_case(
      "RoPE/partial_at_offset", [](Generator&) { return std::make_shared<RoPE>(6, RoPEOptions{.rotary_dim = 4}); },
      inputs_of({{1, 2, 3, 6}}), [](RoPE& m, const Inputs& x) { return m.forward(x[0], 7); }));
  cases.push_back(module_case(
      "RoPE/step", [](Generator&) { return std::make_shared<RoPE>(4); }, inputs_of({{2, 2, 4}}),
      [](RoPE& m, const Inputs& x) { return m.step(x[0], 3); }));
}

void add_conv_cases(Cases& cases) {
  add_unary(cases, "CausalConv1D/forward", [](Generator& g) { return std::make_shared<CausalConv1D>(3, g); }, {2, 6, 3});
  add_unary(cases, "CausalConv1D/width_1", [](Generator& g) { return std::make_shared<CausalConv1D>(3, g, 1); },
            {2, 4, 3});
  // Shorter than the window, from a given state: the output and the carried state both depend on
  // the incoming state.
  cases.push_back(module_case(
      "CausalConv1D/from_state", [](Generator& g) { return std::make_shared<CausalConv1D>(3, g); },
      inputs_of({{2, 2, 3}, {2, 3, 3}}), [](CausalConv1D& m, const Inputs& x) {
        Tensor final_state;
        const Tensor y = m.forward(x[0], x[1], &final_state);
        return cat({flatten(y), flatten(final_state)});
      }));
  cases.push_back(module_case(
      "CausalConv1D/steps", [](Generator& g) { return std::make_shared<CausalConv1D>(3, g); }, inputs_of({{2, 5, 3}}),
      [](CausalConv1D& m, const Inputs& x) {
        Tensor state = m.init_state(2);
        std::vector<Tensor> ys;
        for (int64_t t = 0; t < x[0].size(1); ++t) ys.push_back(m.step(select(x[0], 1, t), state));
        return stack(ys, 1);
      }));
}

}  // namespace

void add_layer_cases(Cases& cases) {
  add_linear_cases(cases);
  add_norm_cases(cases);
  add_feedforward_cases(cases);
  add_position_cases(cases);
  add_conv_cases(cases);
}

}  // namespace linea::nn
