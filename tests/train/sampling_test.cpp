// The draw behind generation: sample_tokens on the CPU (cpu/sample.cpp), and sample_from_logits
// built on it, give exactly the tokens of an oracle written apart from the kernel, from the
// definition of the draw (reference_draw below), on fresh random logits in every mode: greedy,
// temperature, top-k, top-p and their combinations, with ties; rows that cannot be sampled get -1;
// bad input is a clear Error; and HostCopy, which generate reads the tokens through, on the CPU.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "nn/model.h"
#include "tensor/host_copy.h"
#include "tests/test_util.h"
#include "tests/train/nan_model.h"
#include "train/generate.h"

namespace linea::train {
namespace {

// The draw as defined, written independently of cpu/sample.cpp so that a slip in the kernel cannot
// hide behind the same slip here. Candidates are (logit, id) pairs in decreasing logit, equal
// logits by increasing id (-0.0 equals +0.0, and two -inf are equal too, so the lower id comes
// first, as generate's sampler has always ordered them); greedy takes the first. Otherwise the
// first top_k candidates weigh exp((logit - top) / T), the nucleus is the shortest prefix whose
// share of that weight reaches top_p, and u picks from the nucleus through its inverse CDF.
int64_t reference_draw(const std::vector<double>& logits, const SampleOptions& o, double u) {
  struct Candidate {
    double logit;
    int64_t id;
  };
  std::vector<Candidate> candidates;
  for (size_t id = 0; id < logits.size(); ++id) candidates.push_back({logits[id], static_cast<int64_t>(id)});
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.logit != b.logit ? a.logit > b.logit : a.id < b.id;
  });
  if (o.temperature == 0.0) return candidates.front().id;

  const size_t k = o.top_k > 0 ? std::min(static_cast<size_t>(o.top_k), candidates.size()) : candidates.size();
  std::vector<double> weights;
  for (size_t i = 0; i < k; ++i)
    weights.push_back(std::exp((candidates[i].logit - candidates.front().logit) / o.temperature));
  double total = 0.0;
  for (double w : weights) total += w;

  std::vector<double> cumulative_share(k);
  std::transform(weights.begin(), weights.end(), cumulative_share.begin(), [&](double w) { return w / total; });
  std::partial_sum(cumulative_share.begin(), cumulative_share.end(), cumulative_share.begin());
  const auto reaches_top_p = std::find_if(cumulative_share.begin(), cumulative_share.end(),
                                          [&](double share) { return share >= o.top_p; });
  const size_t nucleus =
      reaches_top_p == cumulative_share.end() ? k : static_cast<size_t>(reaches_top_p - cumulative_share.begin()) + 1;

  // Inverse CDF: the first candidate whose cumulative weight passes u times the nucleus' weight
  // (the last one should rounding leave u short of every step).
  std::vector<double> cdf(weights.begin(), weights.begin() + static_cast<std::ptrdiff_t>(nucleus));
  std::partial_sum(cdf.begin(), cdf.end(), cdf.begin());
  const auto drawn = std::upper_bound(cdf.begin(), cdf.end(), u * cdf.back());
  return candidates[drawn == cdf.end() ? nucleus - 1 : static_cast<size_t>(drawn - cdf.begin())].id;
}

// Every mode and their combinations; top_k beyond V and a top_p so small that one token is kept.
std::vector<SampleOptions> every_mode() {
  std::vector<SampleOptions> modes;
  for (double temperature : {0.0, 0.3, 1.0, 2.5})
    for (int64_t top_k : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{1000}})
      for (double top_p : {1.0, 0.9, 0.5, 1e-9}) modes.push_back({.temperature = temperature, .top_k = top_k, .top_p = top_p});
  return modes;
}

// Logits (B, V) of one of three kinds: normal values, small integers (many ties) and values with
// signed zeros and -inf among them (ties at zero, masked tokens; each row keeps a finite first
// logit, since a row of -inf cannot be sampled).
Tensor random_logits(int64_t rows, int64_t vocab, int kind, Generator& gen) {
  std::vector<double> v = randn({rows, vocab}, kFloat64, &gen).to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t j = i % static_cast<size_t>(vocab);
    if (kind == 1) v[i] = std::floor(std::abs(v[i]) * 2);
    if (kind == 2 && j % 3 == 0) v[i] = (i % 2 == 0) ? 0.0 : -0.0;
    if (kind == 2 && j % 7 == 1) v[i] = -std::numeric_limits<double>::infinity();
  }
  return from_vector<double>(v, {rows, vocab});
}

TEST(SampleTokens, CpuMatchesTheReferenceDrawOnRandomLogits) {
  const std::vector<SampleOptions> modes = every_mode();
  int64_t compared = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Generator gen(seed);
    const int64_t vocab = std::vector<int64_t>{1, 2, 7, 50, 301}[seed % 5];
    const int64_t rows = 3;
    const Tensor logits = random_logits(rows, vocab, static_cast<int>(seed % 3), gen);
    const Tensor u = rand({rows}, kFloat64, &gen);
    const std::vector<double> x = logits.to_vector<double>(), us = u.to_vector<double>();
    for (const SampleOptions& o : modes) {
      const std::vector<int64_t> ids = sample_tokens(logits, u, sampling_params(o)).to_vector<int64_t>();
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<double> row(x.begin() + r * vocab, x.begin() + (r + 1) * vocab);
        const int64_t expected = reference_draw(row, o, us[r]);
        ASSERT_EQ(ids[r], expected) << "seed " << seed << " V " << vocab << " row " << r << " T " << o.temperature
                                    << " top_k " << o.top_k << " top_p " << o.top_p << " u " << us[r];
        ASSERT_EQ(sample_from_logits(row, o, us[r]), expected);
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 10000);
}

TEST(SampleTokens, Float32LogitsDrawWhatTheirDoubleValuesDraw) {
  Generator gen(7);
  const Tensor logits = randn({4, 40}, kFloat32, &gen);
  const Tensor u = rand({4}, kFloat64, &gen);
  const std::vector<double> x = logits.to_vector<double>(), us = u.to_vector<double>();
  for (const SampleOptions& o : every_mode()) {
    const std::vector<int64_t> ids = sample_tokens(logits, u, sampling_params(o)).to_vector<int64_t>();
    for (int64_t r = 0; r < 4; ++r)
      EXPECT_EQ(ids[r], reference_draw(std::vector<double>(x.begin() + r * 40, x.begin() + (r + 1) * 40), o, us[r]));
  }
}

TEST(SampleTokens, TiesGoToTheLowestIdAndTheWalkFollowsIdOrder) {
  const Tensor flat = from_vector<double>({1, 3, 3, 0, 3}, {1, 5});
  EXPECT_EQ(sample_tokens(flat, from_vector<double>({0.99}, {1}), {.temperature = 0}).item(), 1);
  // Three equal maxima: u splits them in id order (1, 2, 4), each a third of the kept mass.
  const SamplingParams top3{.temperature = 1, .top_k = 3};
  EXPECT_EQ(sample_tokens(flat, from_vector<double>({0.1}, {1}), top3).item(), 1);
  EXPECT_EQ(sample_tokens(flat, from_vector<double>({0.5}, {1}), top3).item(), 2);
  EXPECT_EQ(sample_tokens(flat, from_vector<double>({0.9}, {1}), top3).item(), 4);
  // -0.0 and +0.0 are one value: the lower id first.
  const Tensor zeros = from_vector<double>({-1, 0.0, -0.0, -2}, {1, 4});
  EXPECT_EQ(sample_tokens(zeros, from_vector<double>({0.0}, {1}), {.temperature = 0}).item(), 1);
  EXPECT_EQ(sample_tokens(from_vector<double>({-0.0, 0.0}, {1, 2}), from_vector<double>({0.0}, {1}),
                          {.temperature = 0}).item(), 0);
}

TEST(SampleTokens, RowsThatCannotBeSampledGetMinusOne) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor logits = from_vector<double>({0, nan, 1,  //
                                             0, inf, 1,  //
                                             -inf, -inf, -inf,  //
                                             -inf, 2, -inf},
                                            {4, 3});
  const Tensor u = from_vector<double>({0.5, 0.5, 0.5, 0.5}, {4});
  for (double temperature : {0.0, 1.0})
    EXPECT_EQ(sample_tokens(logits, u, {.temperature = temperature}).to_vector<int64_t>(),
              (std::vector<int64_t>{-1, -1, -1, 1}))
        << "temperature " << temperature;
  EXPECT_LINEA_ERROR(sample_from_logits({0, nan}, {}, 0.5), "NaN");
}

TEST(SampleTokens, BadInputIsAClearError) {
  const Tensor logits = zeros({2, 5}, kFloat64), u = zeros({2}, kFloat64);
  EXPECT_LINEA_ERROR(sample_tokens(zeros({2, 5}, kInt64), u, {}), "sample_tokens", "float32 or float64");
  EXPECT_LINEA_ERROR(sample_tokens(zeros({5}, kFloat64), u, {}), "sample_tokens", "(batch, vocab)");
  EXPECT_LINEA_ERROR(sample_tokens(zeros({2, 0}, kFloat64), u, {}), "sample_tokens", "no logits");
  EXPECT_LINEA_ERROR(sample_tokens(logits, zeros({3}, kFloat64), {}), "sample_tokens", "one uniform per row");
  EXPECT_LINEA_ERROR(sample_tokens(logits, zeros({2, 1}, kFloat64), {}), "sample_tokens", "one uniform per row");
  EXPECT_LINEA_ERROR(sample_tokens(logits, zeros({2}, kFloat32), {}), "sample_tokens", "float64");
  EXPECT_LINEA_ERROR(sample_tokens(logits, u, {.top_p = 0}), "sample_tokens", "top_p must be in (0, 1]");
  EXPECT_LINEA_ERROR(sample_tokens(logits, u, {.top_p = 1.5}), "sample_tokens", "top_p must be in (0, 1]");
  EXPECT_LINEA_ERROR(sample_tokens(logits, u, {.temperature = -1}), "sample_tokens", "temperature");
  EXPECT_LINEA_ERROR(sample_tokens(logits, u, {.top_k = -1}), "sample_tokens", "top_k");
  EXPECT_EQ(sample_tokens(zeros({0, 5}, kFloat64), zeros({0}, kFloat64), {}).numel(), 0);
}

TEST(SampleTokens, StridedLogitsAndUniformsAreRead) {
  Generator gen(3);
  const Tensor wide = randn({3, 20}, kFloat64, &gen);
  const Tensor logits = slice(wide, 1, 0, 20, 2);  // rows of 10 with a stride of 2
  const Tensor u2 = rand({3, 2}, kFloat64, &gen);
  const Tensor u = select(u2, 1, 1);  // a stride of 2
  const SamplingParams p{.temperature = 1, .top_p = 0.8};
  EXPECT_EQ(sample_tokens(logits, u, p).to_vector<int64_t>(),
            sample_tokens(contiguous(logits), contiguous(u), p).to_vector<int64_t>());
}

// sample_tokens_ draws into a buffer it is given what sample_tokens returns, and refuses a buffer
// it could not write each row's id into.
TEST(SampleTokens, IntoAGivenBufferDrawsTheSameIds) {
  Generator gen(12);
  const Tensor logits = randn({4, 37}, kFloat64, &gen);
  const Tensor u = rand({4}, kFloat64, &gen);
  for (const SamplingParams& p : {SamplingParams{.temperature = 0}, SamplingParams{.temperature = 0.7, .top_k = 9},
                                  SamplingParams{.temperature = 1.3, .top_p = 0.6}}) {
    Tensor ids = full({4}, -5.0, kInt64);
    Tensor& written = sample_tokens_(ids, logits, u, p);
    EXPECT_EQ(written.raw_data(), ids.raw_data());
    EXPECT_EQ(ids.to_vector<int64_t>(), sample_tokens(logits, u, p).to_vector<int64_t>());
  }
  Tensor wrong_dtype = zeros({4}, kFloat64), wrong_rows = zeros({3}, kInt64);
  Tensor strided = select(zeros({4, 2}, kInt64), 1, 0);
  EXPECT_LINEA_ERROR(sample_tokens_(wrong_dtype, logits, u, {}), "sample_tokens_", "(4) Int64 contiguous");
  EXPECT_LINEA_ERROR(sample_tokens_(wrong_rows, logits, u, {}), "sample_tokens_", "(4) Int64 contiguous");
  EXPECT_LINEA_ERROR(sample_tokens_(strided, logits, u, {}), "sample_tokens_", "(4) Int64 contiguous");
  Tensor fine = zeros({4}, kInt64);
  EXPECT_LINEA_ERROR(sample_tokens_(fine, logits, rand({4}, kFloat32, &gen), {}), "sample_tokens_", "float64");
}

// A model whose logits are NaN: generate says it cannot sample, rather than drawing garbage or
// failing one step later in the embedding with "index -1".
TEST(SampleTokens, GenerateRefusesLogitsThatCannotBeSampled) {
  const auto model = testing::model_of_nans("S");
  for (int64_t tokens : {1, 5})
    EXPECT_LINEA_ERROR(generate(*model, std::vector<int64_t>{1, 2}, {.tokens = tokens}, kCPU), "generate",
                       "sequence 1 at new token 1", "cannot sample");
}

TEST(HostCopy, OnTheCpuGivesTheValuesStarted) {
  HostCopy copy(4 * sizeof(int64_t), kCPU);
  EXPECT_LINEA_ERROR(copy.wait(), "without a copy started");
  copy.start(from_vector<int64_t>({1, 2, 3}, {3}));
  EXPECT_EQ(copy.wait().to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_LINEA_ERROR(copy.start(zeros({5}, kInt64)), "more than the");
}

}  // namespace
}  // namespace linea::train
