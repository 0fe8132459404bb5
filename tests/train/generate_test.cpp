// Generation (train/generate.h): the prompt prefilled in one pass and then decoded gives the
// tokens of the plain loop (every token through step(), each drawn with the sampler), for every
// layer letter; every row of a batch (prompts of different lengths, several seeds of one prompt)
// is what generating it alone gives; bad requests are refused before any work.
#include <string>
#include <vector>

#include "nn/model.h"
#include "tests/test_util.h"
#include "train/generate.h"

namespace linea::train {
namespace {

constexpr int64_t kVocab = 17;

std::unique_ptr<nn::LanguageModel> make_model(const std::string& pattern, DType dtype) {
  nn::ModelConfig c;
  c.vocab_size = kVocab;
  c.d_model = 16;
  c.heads = 2;
  c.pattern = pattern;
  Generator gen(21);
  auto model = std::make_unique<nn::LanguageModel>(c, gen);
  model->to(dtype);
  return model;
}

std::vector<int64_t> random_prompt(int64_t length, Generator& gen) {
  return randint(0, kVocab, {length}, kCPU, &gen).to_vector<int64_t>();
}

// What generate did before prefill: every prompt token through step(), then each new token drawn
// from the logits with a uniform from the seed's stream.
std::vector<int64_t> token_by_token(nn::LanguageModel& model, const std::vector<int64_t>& prompt,
                                    const SampleOptions& o) {
  NoGradGuard no_grad;
  nn::LanguageModel::State state = model.init_state(1);
  Tensor logits;
  for (int64_t id : prompt) logits = model.step(from_vector<int64_t>({id}, {1}), state);
  Generator gen(o.seed);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < o.tokens; ++i) {
    const double u = rand({}, kFloat64, &gen).item();
    out.push_back(sample_from_logits(logits.to_vector<double>(), o, u));
    logits = model.step(from_vector<int64_t>({out.back()}, {1}), state);
  }
  return out;
}

std::vector<char> all_letters() {
  std::vector<char> letters;
  for (const nn::LayerKind& kind : nn::layer_kinds()) letters.push_back(kind.letter);
  return letters;
}

class GenerateEveryLetter : public ::testing::TestWithParam<char> {};

TEST_P(GenerateEveryLetter, PrefillThenDecodeGivesTheTokensOfTheTokenByTokenLoop) {
  auto model = make_model(std::string(2, GetParam()), kFloat64);
  Generator gen(5);
  const SampleOptions o{.tokens = 24, .temperature = 0.9, .top_k = 0, .top_p = 0.95, .seed = 77};
  for (int64_t length : {1, 40}) {
    const std::vector<int64_t> prompt = random_prompt(length, gen);
    EXPECT_EQ(generate(*model, prompt, o, kCPU), token_by_token(*model, prompt, o)) << "prompt length " << length;
  }
}

// Prompts of lengths 1, 9 and 33, the second one also with two more seeds: one batch of five rows,
// each row the tokens it gets alone.
void expect_rows_as_alone(const std::string& pattern, DType dtype) {
  auto model = make_model(pattern, dtype);
  Generator gen(6);
  const std::vector<int64_t> a = random_prompt(1, gen), b = random_prompt(9, gen), c = random_prompt(33, gen);
  const std::vector<Request> requests{{a, 3}, {b, 3}, {c, 3}, {b, 4}, {b, 5}};
  const SampleOptions o{.tokens = 20, .temperature = 1.0, .top_k = 5};
  std::vector<std::pair<size_t, int64_t>> streamed;
  const auto together =
      generate(*model, requests, o, kCPU, [&](size_t row, int64_t id) { streamed.push_back({row, id}); });
  ASSERT_EQ(together.size(), requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    SampleOptions alone = o;
    alone.seed = requests[r].seed;
    EXPECT_EQ(together[r], generate(*model, requests[r].prompt, alone, kCPU)) << pattern << " row " << r;
  }
  // The callback saw every token as drawn: step by step, the rows of a step in order.
  ASSERT_EQ(streamed.size(), requests.size() * 20);
  for (size_t i = 0; i < streamed.size(); ++i) {
    const size_t row = i % requests.size(), step = i / requests.size();
    EXPECT_EQ(streamed[i], std::make_pair(row, together[row][step])) << i;
  }
}

TEST_P(GenerateEveryLetter, EveryRowOfABatchIsWhatItGeneratesAlone) {
  expect_rows_as_alone(std::string(2, GetParam()), kFloat64);
}

INSTANTIATE_TEST_SUITE_P(Letters, GenerateEveryLetter, ::testing::ValuesIn(all_letters()),
                         [](const ::testing::TestParamInfo<char>& info) { return std::string(1, info.param); });

// float32, as checkpoints run: the batch's rounding differs from a lone row's, the tokens do not.
TEST(Generate, EveryRowOfAFloat32BatchIsWhatItGeneratesAlone) {
  expect_rows_as_alone("SRU", kFloat32);
}

TEST(Generate, MaximumLengthBoundsPromptAndNewTokens) {
  auto model = make_model("RS", kFloat64);
  Generator gen(7);
  const std::vector<int64_t> prompt = random_prompt(6, gen);
  EXPECT_EQ(generate(*model, prompt, {.tokens = 4, .max_length = 10}, kCPU).size(), 4u);  // exactly the limit
  EXPECT_LINEA_ERROR(generate(*model, prompt, {.tokens = 5, .max_length = 10}, kCPU), "the prompt (6 tokens)",
                     "11", "maximum length 10", "at most 4 new tokens");
  EXPECT_LINEA_ERROR(generate(*model, prompt, {.tokens = 0, .max_length = 5}, kCPU), "the prompt is 6 tokens",
                     "longer than the maximum length 5");
  EXPECT_LINEA_ERROR(generate(*model, {Request{prompt, 0}, Request{random_prompt(12, gen), 0}},
                              {.tokens = 1, .max_length = 10}, kCPU),
                     "prompt 2 is 12 tokens");
  EXPECT_LINEA_ERROR(generate(*model, prompt, {.max_length = -1}, kCPU), "maximum length must be >= 0");
}

TEST(Generate, RefusesBadRequestsBeforeAnyWork) {
  auto model = make_model("RS", kFloat64);
  EXPECT_LINEA_ERROR(generate(*model, std::vector<Request>{}, {}, kCPU), "no prompts");
  EXPECT_LINEA_ERROR(generate(*model, std::vector<int64_t>{}, {}, kCPU), "the prompt encodes to no tokens");
  EXPECT_LINEA_ERROR(generate(*model, {Request{{1, 2}, 0}, Request{{}, 0}}, {}, kCPU), "prompt 2 encodes to no tokens");
  EXPECT_LINEA_ERROR(generate(*model, {Request{{1, kVocab}, 0}}, {}, kCPU), "token 17", "vocabulary of 17");
  EXPECT_LINEA_ERROR(generate(*model, std::vector<int64_t>{3, 4}, {.temperature = -1}, kCPU), "temperature");
  EXPECT_LINEA_ERROR(generate(*model, std::vector<int64_t>{3, 4}, {.top_p = 0}, kCPU), "top_p");
  EXPECT_LINEA_ERROR(generate(*model, std::vector<int64_t>{3, 4}, {.tokens = -2}, kCPU), "number of tokens");
}

}  // namespace
}  // namespace linea::train
