// Prompt processing and stacked decoding on the GPU, for every layer letter: the generic path of
// `linea generate` runs on a CUDA device (the fused attention with the queries the last T of the
// cached positions, the chunked scans started from a state, a KV cache stacked from prompts of
// different lengths through the masked composite attention) and agrees with itself token by
// token and with the CPU.
#include <string>
#include <vector>

#include "nn/model.h"
#include "tests/cuda/parity.h"
#include "tests/nn/decode_states.h"

namespace linea::testing {
namespace {

constexpr int64_t kVocab = 23;

struct DeviceRun {
  Tensor prefill_logits, step_logits;  // after a (2, 37) prompt, on the CPU
  double state_diff = 0;               // prefill's state against the steps' state
  std::string worst;
  std::vector<Tensor> stacked_logits;  // 6 steps of prompts of 5 and 19 tokens stacked, on the CPU
};

DeviceRun run_on(char letter, DType dtype, Device device) {
  nn::ModelConfig c;
  c.vocab_size = kVocab;
  c.d_model = 24;
  c.heads = 2;
  c.pattern = std::string(1, letter) + "S";
  c.layers = json::Value::object();
  // Chunks shorter than the prompt, so prefill crosses chunk boundaries.
  for (const char chunked : std::string("LHAFGRDUW"))
    c.layers[std::string(1, chunked)] = json::parse(R"({"chunk_size": 16})");
  Generator init(31), data(32);
  nn::LanguageModel model(c, init);
  model.to(dtype);
  model.to(device);
  NoGradGuard no_grad;
  const Tensor ids = to(randint(0, kVocab, {2, 37}, kCPU, &data), device);
  DeviceRun r;
  nn::LanguageModel::State prefilled = model.init_state(2), stepped = model.init_state(2);
  r.prefill_logits = to(model.prefill(ids, prefilled), kCPU);
  r.step_logits = to(step_through(model, ids, stepped), kCPU);
  r.state_diff = state_diff(prefilled, stepped, r.worst);

  nn::LanguageModel::State a = model.init_state(1), b = model.init_state(1);
  model.prefill(to(randint(0, kVocab, {1, 5}, kCPU, &data), device), a);
  model.prefill(to(randint(0, kVocab, {1, 19}, kCPU, &data), device), b);
  nn::LanguageModel::State both = model.stack_states({&a, &b});
  for (int64_t t = 0; t < 6; ++t)
    r.stacked_logits.push_back(to(model.step(to(randint(0, kVocab, {2}, kCPU, &data), device), both), kCPU));
  return r;
}

struct Case {
  char letter;
  DType dtype;
};

class PrefillParity : public ::testing::TestWithParam<Case> {};

TEST_P(PrefillParity, PrefillAndStackedDecodingMatchTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  const auto [letter, dtype] = GetParam();
  NoTf32 exact_gemms;
  const double tol = dtype == kFloat64 ? 1e-9 : 1e-4;
  const DeviceRun cpu_run = run_on(letter, dtype, kCPU), gpu_run = run_on(letter, dtype, gpu());
  EXPECT_LE(relative_diff(gpu_run.prefill_logits, gpu_run.step_logits), tol) << "GPU prefill vs steps";
  EXPECT_LE(gpu_run.state_diff, tol) << "GPU prefill's state vs the steps': " << gpu_run.worst;
  EXPECT_LE(relative_diff(gpu_run.prefill_logits, cpu_run.prefill_logits), tol) << "GPU vs CPU prefill";
  for (size_t t = 0; t < cpu_run.stacked_logits.size(); ++t)
    EXPECT_LE(relative_diff(gpu_run.stacked_logits[t], cpu_run.stacked_logits[t]), tol) << "stacked step " << t;
}

std::vector<Case> every_letter_in_both_dtypes() {
  std::vector<Case> cases;
  for (const nn::LayerKind& kind : nn::layer_kinds())
    for (DType dtype : {kFloat32, kFloat64}) cases.push_back({kind.letter, dtype});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Letters, PrefillParity, ::testing::ValuesIn(every_letter_in_both_dtypes()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(1, info.param.letter) + (info.param.dtype == kFloat64 ? "_f64" : "_f32");
                         });

}  // namespace
}  // namespace linea::testing
