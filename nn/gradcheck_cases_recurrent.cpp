// Gradient-check rows of the recurrent mixers: DeltaNet (nn/linear_attention/deltanet.h), the Griffin block
// and its RG-LRU (nn/recurrent/), WQKV pooling (nn/pooling/wqkv.h), each w.r.t. its input and all
// its parameters, in float64, in both forms. Sizes are small but keep what matters: T = 5 over
// chunks of 4 (a padded last chunk; sub-blocks of 2 for the scan-based forms), two heads where
// the layer has heads, and the token-by-token step for the decoding form.
#include <string>

#include "nn/gradcheck_cases.h"
#include "nn/gradcheck_module.h"
#include "nn/linear_attention/deltanet.h"
#include "nn/pooling/wqkv.h"
#include "nn/recurrent/griffin.h"

namespace linea::nn {

namespace {

using Cases = std::vector<gradcheck::Case>;
using Inputs = std::vector<Tensor>;

constexpr int64_t kB = 1, kT = 5, kD = 4;

// The parallel form, or with `decode` the recurrent one token by token.
template <class Layer, class Config>
void add_mixer_rows(Cases& cases, const std::string& name, const Config& config) {
  for (const bool decode : {false, true})
    cases.push_back(module_case(
        name + (decode ? "_decode" : ""), [config](Generator& gen) { return std::make_shared<Layer>(config, gen); },
        inputs_of({{kB, kT, kD}}), [decode](Layer& m, const Inputs& x) { return mixer_output(m, x[0], decode); }));
}

void add_deltanet_rows(Cases& cases) {
  linear::DeltaNetConfig c{.d_model = kD, .heads = 2, .head_dim = 2, .chunk_size = 4};
  add_mixer_rows<linear::DeltaNet>(cases, "DeltaNet/silu", c);
  c.feature_map = linear::DeltaFeatureMap::Identity;
  c.output_norm = false;
  add_mixer_rows<linear::DeltaNet>(cases, "DeltaNet/identity_no_norm", c);
}

void add_griffin_rows(Cases& cases) {
  GriffinConfig c;
  c.d_model = kD;
  c.lru = {.width = 4, .heads = 2, .scan = {4, 2}};
  add_mixer_rows<GriffinBlock>(cases, "GriffinBlock/two_gate_blocks", c);
  // The RG-LRU alone, dense gates, from a given state: the output and the carried state both
  // depend on it.
  cases.push_back(module_case(
      "RGLRU/from_state",
      [](Generator& gen) { return std::make_shared<RGLRU>(RGLRUConfig{.width = 3, .scan = {4, 2}}, gen); },
      inputs_of({{2, kT, 3}, {2, 3}}), [](RGLRU& m, const Inputs& x) {
        Tensor final_h;
        const Tensor y = m.forward(x[0], x[1], &final_h);
        return cat({flatten(y), flatten(final_h)});
      }));
}

void add_wqkv_rows(Cases& cases) {
  WqkvConfig c{.d_model = kD, .heads = 1, .slots = 3, .scan = {4, 2}};
  add_mixer_rows<WqkvPooling>(cases, "WqkvPooling/one_head", c);
  c.heads = 2;
  c.scale = WqkvScale::None;
  add_mixer_rows<WqkvPooling>(cases, "WqkvPooling/two_heads_no_scale", c);
}

}  // namespace

void add_recurrent_cases(Cases& cases) {
  add_deltanet_rows(cases);
  add_griffin_rows(cases);
  add_wqkv_rows(cases);
}

}  // namespace linea::nn
