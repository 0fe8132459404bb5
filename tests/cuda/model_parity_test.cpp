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
  c.layers = json::Object();
  for (const char chunked : std::string("LHAFGRDUW")) c.layers[std::string(1, chunked)] = json::parse(R"({"chunk_size": 16})");
  return c;
}

// |a - e| <= rtol * max|e| + atol, elementwise: gradients of different layers differ in scale by
// orders of magnitude, and reassociated float32 sums err relative to the tensor, not the element.
::testing::AssertionResult close_relative_to_max(const Tensor& got, const Tensor& expected, double rtol, double atol) {
  if (got.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shapes differ: " << got.describe() << " vs " << expected.describe();
  const std::vector<double> a = to(got, kCPU).to_vector<double>(), e = expected.to_vector<double>();
  double scale = 0;
  for (double x : e) scale = std::max(scale, std::abs(x));
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - e[i]) <= rtol * scale + atol))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << e[i] << " (max |e| " << scale
                                           << ")";
  return ::testing::AssertionSuccess();
}

struct ParityCase {
  char letter;
  DType dtype;
};

class ModelParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(ModelParity, LossGradientsAndDecodingMatchTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  const auto [letter, dtype] = GetParam();
  const double rtol = dtype == kFloat64 ? 1e-10 : 2e-4, atol = dtype == kFloat64 ? 1e-12 : 1e-6;
  NoTf32 exact_gemms;
  Generator init_cpu(11), init_gpu(11), data(12);
  nn::LanguageModel cpu_model(config_with(letter), init_cpu), gpu_model(config_with(letter), init_gpu);
  cpu_model.to(dtype);
  gpu_model.to(dtype);
  gpu_model.to(gpu());
  const Tensor ids = randint(0, kVocab, {3, 21}, kCPU, &data);
  const Tensor targets = randint(0, kVocab, {3, 21}, kCPU, &data);

  const Tensor cpu_loss = cpu_model.loss(ids, targets);
  const Tensor gpu_loss = gpu_model.loss(on_gpu(ids), on_gpu(targets));
  EXPECT_TRUE(close_relative_to_max(gpu_loss, cpu_loss, rtol, atol)) << "loss";
  backward(cpu_loss);
  backward(gpu_loss);
  const auto cpu_params = cpu_model.named_parameters(), gpu_params = gpu_model.named_parameters();
  ASSERT_EQ(cpu_params.size(), gpu_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    ASSERT_EQ(cpu_params[i].name, gpu_params[i].name);
    ASSERT_TRUE(gpu_params[i].tensor.grad().defined()) << gpu_params[i].name << " got no gradient on the GPU";
    EXPECT_TRUE(gpu_params[i].tensor.grad().device().is_cuda()) << gpu_params[i].name;
    EXPECT_TRUE(close_relative_to_max(gpu_params[i].tensor.grad(), cpu_params[i].tensor.grad(), rtol, atol))
        << "gradient of " << cpu_params[i].name;
  }

  // Decoding from the recurrent state (or the KV cache) on the GPU follows the CPU step by step.
  NoGradGuard no_grad;
  auto cpu_state = cpu_model.init_state(3);
  auto gpu_state = gpu_model.init_state(3);
  for (int64_t t = 0; t < 10; ++t) {
    const Tensor token = select(ids, 1, t);
    const Tensor cpu_logits = cpu_model.step(token, cpu_state);
    const Tensor gpu_logits = gpu_model.step(on_gpu(token), gpu_state);
    ASSERT_TRUE(gpu_logits.device().is_cuda());
    EXPECT_TRUE(close_relative_to_max(gpu_logits, cpu_logits, rtol, atol)) << "decoding step " << t;
  }
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
    if (record.get<std::string>("kind") == "step") losses.push_back(record.get<double>("loss"));
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
