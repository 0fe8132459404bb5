// Generation's draw on the GPU (cuda/kernels/sample.cu) against the CPU's (cpu/sample.cpp, the
// reference), at awkward sizes: a vocabulary of 1, one below a warp's multiple, one tile of the
// row kernel's many (8192) and GPT-2's 50257 (50 tiles, not a multiple of anything); batches of
// 1, 3 and 16. Then ties, rows that cannot be sampled, strided logits, the asynchronous copies to
// the host (on the device's stream and beside it), and generate() on the GPU giving the CPU's tokens.
//
// The GPU adds its running sums in a tree, the CPU one term at a time, so the two can disagree
// when a running sum lands within rounding (~1e-16 relative) of top_p or of u times the kept sum.
// With random logits and random u that has a probability of about 1e-13 per draw: improbable in
// the few thousand draws below. A disagreement here is a bug, not bad luck.
#include <string>
#include <vector>

#include "nn/model.h"
#include "tensor/host_copy.h"
#include "tests/cuda/parity.h"
#include "tests/train/nan_model.h"
#include "train/generate.h"

namespace linea::testing {
namespace {

std::vector<SamplingParams> modes() {
  return {
      {.temperature = 0},                               // greedy
      {.temperature = 1},                               // plain
      {.temperature = 0.7, .top_k = 40},                // top-k
      {.temperature = 1.3, .top_p = 0.9},               // nucleus
      {.temperature = 0.8, .top_k = 3, .top_p = 0.5},   // both
      {.temperature = 1, .top_p = 1e-9},                // nucleus of one
      {.temperature = 2, .top_k = 100000},              // top_k beyond V
  };
}

std::string describe(const SamplingParams& p) {
  return "T " + std::to_string(p.temperature) + " top_k " + std::to_string(p.top_k) + " top_p " +
         std::to_string(p.top_p);
}

TEST(CudaSampleTokens, MatchesTheCpuAtAwkwardSizes) {
  LINEA_SKIP_WITHOUT_CUDA();
  uint64_t seed = 500;
  for (DType dtype : {kFloat32, kFloat64})
    for (int64_t vocab : {1, 7, 8192, 50257})
      for (int64_t rows : {1, 3, 16}) {
        Generator gen(++seed);
        // Spread like a trained model's logits: a few tokens stand out, the tail is long.
        const Tensor logits = mul(randn({rows, vocab}, dtype, &gen), full({}, 4.0, dtype));
        const Tensor u = rand({rows}, kFloat64, &gen);
        for (const SamplingParams& p : modes()) {
          const Tensor cpu = sample_tokens(logits, u, p);
          const Tensor gpu_ids = sample_tokens(on_gpu(logits), on_gpu(u), p);
          ASSERT_TRUE(gpu_ids.device().is_cuda());
          EXPECT_EQ(to(gpu_ids, kCPU).to_vector<int64_t>(), cpu.to_vector<int64_t>())
              << dtype_name(dtype) << " V " << vocab << " B " << rows << " " << describe(p);
        }
      }
}

TEST(CudaSampleTokens, TiesSignedZerosAndMaskedTokensMatchTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t vocab : {5, 3000}) {
    Generator gen(77 + vocab);
    const int64_t rows = 16;
    std::vector<double> v = randn({rows, vocab}, kFloat64, &gen).to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = std::floor(std::abs(v[i]) * 2);  // 0, 1, 2, ...: many ties, across tiles too
      if (i % 5 == 2) v[i] = -0.0;
      if (i % 11 == 3) v[i] = -inf;
    }
    const Tensor logits = from_vector<double>(v, {rows, vocab});
    const Tensor u = rand({rows}, kFloat64, &gen);
    for (DType dtype : {kFloat32, kFloat64})
      for (const SamplingParams& p : modes())
        EXPECT_EQ(to(sample_tokens(on_gpu(to(logits, dtype)), on_gpu(u), p), kCPU).to_vector<int64_t>(),
                  sample_tokens(to(logits, dtype), u, p).to_vector<int64_t>())
            << dtype_name(dtype) << " V " << vocab << " " << describe(p);
  }
}

TEST(CudaSampleTokens, RowsThatCannotBeSampledGetMinusOne) {
  LINEA_SKIP_WITHOUT_CUDA();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor logits = from_vector<double>({0, nan, 1, 0, inf, 1, -inf, -inf, -inf, -inf, 2, -inf}, {4, 3});
  const Tensor u = from_vector<double>({0.5, 0.5, 0.5, 0.5}, {4});
  for (DType dtype : {kFloat32, kFloat64})
    for (double temperature : {0.0, 1.0})
      EXPECT_EQ(to(sample_tokens(on_gpu(to(logits, dtype)), on_gpu(u), {.temperature = temperature}), kCPU)
                    .to_vector<int64_t>(),
                (std::vector<int64_t>{-1, -1, -1, 1}))
          << dtype_name(dtype) << " temperature " << temperature;
}

TEST(CudaSampleTokens, StridedLogitsMatchTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  Generator gen(9);
  const Tensor wide = randn({3, 2100}, kFloat64, &gen);
  const Tensor u = rand({3}, kFloat64, &gen);
  const Tensor rows = narrow(wide, 1, 50, 2000);          // a row stride beyond the row
  const Tensor every_other = slice(wide, 1, 0, 2100, 2);  // copied into contiguous rows
  for (const SamplingParams& p : modes()) {
    EXPECT_EQ(to(sample_tokens(narrow(on_gpu(wide), 1, 50, 2000), on_gpu(u), p), kCPU).to_vector<int64_t>(),
              sample_tokens(rows, u, p).to_vector<int64_t>())
        << describe(p);
    EXPECT_EQ(to(sample_tokens(slice(on_gpu(wide), 1, 0, 2100, 2), on_gpu(u), p), kCPU).to_vector<int64_t>(),
              sample_tokens(every_other, u, p).to_vector<int64_t>())
        << describe(p);
  }
}

TEST(CudaSampleTokens, ErrorsNameTheMismatch) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor logits = on_gpu(zeros({2, 5}, kFloat32));
  EXPECT_LINEA_ERROR(sample_tokens(logits, zeros({2}, kFloat64), {}), "different devices");
  EXPECT_LINEA_ERROR(sample_tokens(logits, on_gpu(zeros({3}, kFloat64)), {}), "one uniform per row");
  EXPECT_LINEA_ERROR(sample_tokens(on_gpu(zeros({5}, kFloat32)), on_gpu(zeros({5}, kFloat64)), {}),
                     "(batch, vocab)");
}

TEST(CudaHostCopy, GivesEachStartedTensorWithoutWaitingForLaterWork) {
  LINEA_SKIP_WITHOUT_CUDA();
  HostCopy copy(16 * sizeof(int64_t), gpu());
  for (int64_t step = 0; step < 5; ++step) {
    const Tensor ids = on_gpu(arange(step, step + 16, 1, kInt64));
    copy.start(ids);
    // Work queued after the copy: the copy's values are those before it.
    Tensor later = ids;
    fill_(later, -7.0);
    EXPECT_EQ(copy.wait().to_vector<int64_t>(), arange(step, step + 16, 1, kInt64).to_vector<int64_t>());
  }
  copy.start(slice(on_gpu(arange(0, 8, 1, kInt64)), 0, 0, 8, 2));  // strided: copied first
  EXPECT_EQ(copy.wait().to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_LINEA_ERROR(copy.start(zeros({2}, kInt64)), "expected a tensor on cuda:0");
}

// A copy beside the device's stream still waits for the work queued before start(): a fill queued
// behind a long product is what it reads, never the buffer's earlier value.
TEST(CudaHostCopy, BesideWaitsForTheWorkQueuedBeforeIt) {
  LINEA_SKIP_WITHOUT_CUDA();
  HostCopy copy(16 * sizeof(int64_t), gpu(), HostCopy::Stream::Beside);
  Generator gen(3);
  const Tensor a = on_gpu(randn({1024, 1024}, kFloat32, &gen));
  Tensor ids = on_gpu(zeros({16}, kInt64));
  for (int64_t step = 1; step <= 5; ++step) {
    const Tensor busy = matmul(matmul(a, a), a);  // keeps the stream busy before the fill
    fill_(ids, static_cast<double>(step));
    copy.start(ids);
    const Tensor later = matmul(a, a);  // queued after start(): the copy need not wait for it
    EXPECT_EQ(copy.wait().to_vector<int64_t>(), std::vector<int64_t>(16, step));
  }
  copy.start(slice(on_gpu(arange(0, 8, 1, kInt64)), 0, 0, 8, 2));  // strided: copied first
  EXPECT_EQ(copy.wait().to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4, 6}));
}

// A tiny random model in float64 decodes the same tokens on both devices, greedy and sampled, one
// sequence and a batch of four (rows of different prompts and seeds).
TEST(CudaGenerate, SameTokensAsTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  NoTf32 exact_gemms;
  for (const std::string pattern : {"S", "RG"}) {
    nn::ModelConfig c;
    c.vocab_size = 29;
    c.d_model = 16;
    c.heads = 2;
    c.pattern = pattern;
    Generator init(5);
    nn::LanguageModel cpu_model(c, init);
    cpu_model.to(kFloat64);
    Generator init_again(5);
    nn::LanguageModel gpu_model(c, init_again);
    gpu_model.to(kFloat64);
    gpu_model.to(gpu());
    const std::vector<train::Request> requests = {
        {{1, 2, 3}, 11}, {{4}, 12}, {{5, 6, 7, 8, 9, 10, 11}, 13}, {{1, 2, 3}, 14}};
    for (const train::SampleOptions& o :
         {train::SampleOptions{.tokens = 40, .temperature = 0}, train::SampleOptions{.tokens = 40, .temperature = 1},
          train::SampleOptions{.tokens = 300, .temperature = 0.9, .top_k = 10, .top_p = 0.9}}) {
      EXPECT_EQ(train::generate(gpu_model, requests[0].prompt, o, gpu()),
                train::generate(cpu_model, requests[0].prompt, o, kCPU))
          << pattern << " one sequence, T " << o.temperature;
      std::vector<std::pair<size_t, int64_t>> streamed;
      const auto on_gpu_tokens = train::generate(gpu_model, requests, o, gpu(),
                                                 [&](size_t row, int64_t id) { streamed.push_back({row, id}); });
      EXPECT_EQ(on_gpu_tokens, train::generate(cpu_model, requests, o, kCPU)) << pattern << " batch, T " << o.temperature;
      ASSERT_EQ(streamed.size(), requests.size() * static_cast<size_t>(o.tokens));
      for (size_t i = 0; i < streamed.size(); ++i)  // step by step, the rows of a step in order
        EXPECT_EQ(streamed[i].second, on_gpu_tokens[streamed[i].first][i / requests.size()]);
    }
  }
}

TEST(CudaGenerate, RefusesLogitsThatCannotBeSampled) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (const char* pattern : {"S", "R"}) {  // eager steps, and steps replayed from a graph
    const auto model = model_of_nans(pattern);
    model->to(gpu());
    for (int64_t tokens : {1, 5})
      EXPECT_LINEA_ERROR(train::generate(*model, std::vector<int64_t>{1, 2}, {.tokens = tokens}, gpu()), "generate",
                         "sequence 1 at new token 1", "cannot sample");
  }
}

}  // namespace
}  // namespace linea::testing
