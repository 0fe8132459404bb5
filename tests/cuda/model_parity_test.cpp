// Every layer letter on the GPU against the CPU: a tiny language model holding the letter is built
// twice from one seed, once moved to the GPU, and the two must agree on the loss, on the gradient
// of every parameter, and on the logits of token-by-token decoding. The trainer then runs a few
// steps on each device from one seed and the loss curves must agree.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <sstream>

#include "nn/model.h"
#include "tests/cuda/parity.h"
#include "tests/train/data_test_util.h"
#include "tests/train/temp_dir.h"
#include "train/file_io.h"
#include "train/trainer.h"

namespace linea::testing {
namespace {

constexpr int64_t kVocab = 29;

nn::ModelConfig config_with(char letter) {
  nn::ModelConfig c;
  c.vocab_size = kVocab;
  c.d_model = 24;
  c.heads = 2;
  c.pattern = std::string(1, letter) + "S";
  // A chunk shorter than the sequence (21), so the chunked form crosses a chunk boundary (and a
  // sequence that is not a multiple of it), in every letter that has a chunked form.
  c.layers = json::Value::object();
  for (const char chunked : std::string("LHAFGRDUW")) c.layers[std::string(1, chunked)] = json::parse(R"({"chunk_size": 16})");
  return c;
}

// In float32 the two devices round differently (the GPU's chunked scan sums in other orders than
// the CPU's sequential one), and where a layer is ill-conditioned (GLA's identity feature map:
// scores that cancel, then an output norm) the CPU's own float32 error reaches 3.6e-4 of the
// largest gradient. So each float32 result is held to the float64 one: the GPU may err by at most
// rtol of the largest value or twice the CPU's float32 error, whichever is larger.
::testing::AssertionResult close_to_reference(const Tensor& gpu_result, const Tensor& cpu_result,
                                              const Tensor& reference, double rtol, double atol) {
  if (gpu_result.shape() != reference.shape() || cpu_result.shape() != reference.shape())
    return ::testing::AssertionFailure() << "shapes differ: " << gpu_result.describe() << ", " << cpu_result.describe()
                                         << " vs " << reference.describe();
  const Tensor ref = to(reference, kFloat64);
  const double scale = max(abs(ref)).item();
  const double gpu_error = max_abs_diff(to(to(gpu_result, kCPU), kFloat64), ref);
  const double cpu_error = max_abs_diff(to(cpu_result, kFloat64), ref);
  const double allowed = std::max(rtol * scale, 2 * cpu_error) + atol;
  if (gpu_error <= allowed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the GPU errs by " << gpu_error << ", the CPU by " << cpu_error
                                       << ", against the largest value " << scale << " (allowed " << allowed << ")";
}

struct ParityCase {
  char letter;
  DType dtype;
};

class ModelParity : public ::testing::TestWithParam<ParityCase> {};

// The loss, the parameters' gradients (in the models' order) and the logits of ten decoding steps.
struct ModelResults {
  Tensor loss;
  std::vector<std::pair<std::string, Tensor>> grads;
  std::vector<Tensor> logits;
};

ModelResults run_model(char letter, DType dtype, Device device) {
  Generator init(11), data(12);
  nn::LanguageModel model(config_with(letter), init);
  model.to(dtype);
  model.to(device);
  const Tensor ids = randint(0, kVocab, {3, 21}, kCPU, &data);
  const Tensor targets = randint(0, kVocab, {3, 21}, kCPU, &data);
  ModelResults r;
  r.loss = model.loss(to(ids, device), to(targets, device));
  backward(r.loss);
  for (const auto& p : model.named_parameters()) {
    EXPECT_TRUE(p.tensor.grad().defined()) << p.name << " got no gradient on " << device.str();
    EXPECT_EQ(p.tensor.grad().device(), device) << p.name;
    r.grads.emplace_back(p.name, p.tensor.grad().defined() ? to(p.tensor.grad(), kCPU) : Tensor());
  }
  // Decoding from the recurrent state (or the KV cache), token by token.
  NoGradGuard no_grad;
  auto state = model.init_state(3);
  for (int64_t t = 0; t < 10; ++t) r.logits.push_back(to(model.step(to(select(ids, 1, t), device), state), kCPU));
  return r;
}

TEST_P(ModelParity, LossGradientsAndDecodingMatchTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  const auto [letter, dtype] = GetParam();
  const double rtol = dtype == kFloat64 ? 1e-10 : 2e-4, atol = dtype == kFloat64 ? 1e-12 : 1e-6;
  NoTf32 exact_gemms;
  const ModelResults cpu_run = run_model(letter, dtype, kCPU), gpu_run = run_model(letter, dtype, gpu());
  // float64 is its own reference; float32 is held to float64 (close_to_reference).
  const ModelResults reference = dtype == kFloat64 ? cpu_run : run_model(letter, kFloat64, kCPU);
  EXPECT_TRUE(close_to_reference(gpu_run.loss, cpu_run.loss, reference.loss, rtol, atol)) << "loss";
  ASSERT_EQ(cpu_run.grads.size(), gpu_run.grads.size());
  for (size_t i = 0; i < cpu_run.grads.size(); ++i) {
    const auto& [name, cpu_grad] = cpu_run.grads[i];
    ASSERT_EQ(name, gpu_run.grads[i].first);
    if (!gpu_run.grads[i].second.defined()) continue;
    EXPECT_TRUE(close_to_reference(gpu_run.grads[i].second, cpu_grad, reference.grads[i].second, rtol, atol))
        << "gradient of " << name;
  }
  for (size_t t = 0; t < cpu_run.logits.size(); ++t)
    EXPECT_TRUE(close_to_reference(gpu_run.logits[t], cpu_run.logits[t], reference.logits[t], rtol, atol))
        << "decoding step " << t;
}

std::vector<ParityCase> every_letter_in_both_dtypes() {
  std::vector<ParityCase> cases;
  for (const nn::LayerKind& kind : nn::layer_kinds())
    for (DType dtype : {kFloat32, kFloat64}) cases.push_back({kind.letter, dtype});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Letters, ModelParity, ::testing::ValuesIn(every_letter_in_both_dtypes()),
                         [](const ::testing::TestParamInfo<ParityCase>& info) {
                           return std::string(1, info.param.letter) + (info.param.dtype == kFloat64 ? "_f64" : "_f32");
                         });

// The losses of a run's steps, from its log.
std::vector<double> logged_losses(const std::string& run_dir) {
  std::vector<double> losses;
  std::istringstream in(train::read_file(run_dir + "/log.jsonl", "log"));
  std::string line;
  while (std::getline(in, line)) {
    const json::Value record = json::parse(line);
    if (json::get<std::string>(record, "kind") == "step") losses.push_back(json::get<double>(record, "loss"));
  }
  return losses;
}

TEST(TrainerParity, GpuAndCpuRunsFromOneSeedFollowTheSameLossCurve) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoTf32 exact_gemms;
  TempDir dir;
  std::mt19937_64 rng(3);
  train::write_file_atomically(dir / "corpus.txt", zipf_text(rng, 4000));
  train::TrainOptions o;
  o.data = dir / "corpus.txt";
  o.cache_dir = "none";
  o.model = "RS";
  o.d_model = 32;
  o.heads = 2;
  o.steps = 8;
  o.batch = 4;
  o.seq = 24;
  o.warmup = 2;
  o.eval_every = 0;
  o.sample_tokens = 0;
  o.log_every = 1;
  std::FILE* quiet = std::fopen("/dev/null", "w");
  o.out = dir / "cpu";
  train::train_model(o, quiet);
  o.device = "cuda";
  o.out = dir / "cuda";
  train::train_model(o, quiet);
  std::fclose(quiet);
  const std::vector<double> cpu = logged_losses(dir / "cpu"), gpu = logged_losses(dir / "cuda");
  ASSERT_EQ(cpu.size(), 8u);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(gpu[i], cpu[i], 1e-4 * std::abs(cpu[i])) << "step " << i + 1;
  EXPECT_LT(cpu.back(), cpu.front());
}

}  // namespace
}  // namespace linea::testing
