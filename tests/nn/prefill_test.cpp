// Prompt processing in the parallel form (SequenceMixer::prefill, LanguageModel::prefill): for
// every layer letter, and the layer options that take other paths (a sliding window with one K/V
// head, the composite scan, the global key max, the unfused feature map), prefilling a prompt
// leaves the state and next-token logits that feeding it token by token through step() leaves,
// at prompt lengths around a chunk (63, 64, 65), a single token and a long prompt (1000); decoding
// then goes on alike from either. The last layer's output at the last token alone (prefill_last)
// is the last row of its whole output, with the same state. States of sequences of different
// lengths, stacked into one batch, decode each row as it would decode alone.
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "nn/model.h"
#include "tests/nn/decode_states.h"
#include "tests/test_util.h"

namespace linea::nn {
namespace {

using linea::testing::relative_diff;
using linea::testing::state_diff;
using linea::testing::step_through;

// A model to test: a pattern of layer letters and per-letter options (ModelConfig::layers).
struct Variant {
  std::string name;
  std::string pattern;
  std::string layers = "{}";
};

// gtest names a failing case's parameter with this.
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name << " (" << v.pattern << " " << v.layers << ")"; }

std::vector<Variant> every_letter() {
  std::vector<Variant> variants;
  // Two layers of the letter: the second sees the first's output, as in a real model.
  for (const LayerKind& kind : layer_kinds())
    variants.push_back({std::string(1, kind.letter), std::string(2, kind.letter)});
  return variants;
}

// Options whose prefill takes another path than the letter's default.
std::vector<Variant> other_paths() {
  return {
      {"SlidingWindowOneKvHead", "SS", R"({"S": {"window": 8, "kv_heads": 1}})"},
      {"FusedAttentionKernel", "SS", R"({"S": {"fused": true}})"},
      {"ReglaCompositeScan", "RR", R"({"R": {"scan": "composite"}})"},
      {"ReglaGlobalKeyMax", "RR", R"({"R": {"key_max": "global"}})"},
      {"ReglaUnfusedMap", "RR", R"({"R": {"fused": false}})"},
      {"RfaCompositeScan", "AA", R"({"A": {"scan": "composite"}})"},
      {"GriffinCompositeScan", "UU", R"({"U": {"scan": "composite"}})"},
      {"WqkvCompositeScan", "WW", R"({"W": {"scan": "composite"}})"},
      {"Hybrid", "RSU", "{}"},
  };
}

constexpr int64_t kVocab = 13;

std::unique_ptr<LanguageModel> make_model(const Variant& v, DType dtype, uint64_t seed) {
  ModelConfig c;
  c.vocab_size = kVocab;
  c.d_model = 16;
  c.heads = 2;
  c.pattern = v.pattern;
  c.layers = json::parse(v.layers);
  Generator gen(seed);
  auto model = std::make_unique<LanguageModel>(c, gen);
  model->to(dtype);
  model->eval();
  return model;
}

// Greedy continuation of `tokens` steps from logits and state.
std::vector<int64_t> greedy(LanguageModel& model, Tensor logits, LanguageModel::State& state, int64_t tokens) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < tokens; ++i) {
    const Tensor next = argmax(logits, -1);  // (B)
    for (int64_t id : next.to_vector<int64_t>()) out.push_back(id);
    logits = model.step(next, state);
  }
  return out;
}

// The state prefill leaves holds its own memory, of its own size: no view into the prompt's
// buffers (the scans' outputs, a windowed cache's trimmed keys), which would grow with the prompt.
void expect_compact(const LanguageModel::State& state) {
  for (size_t i = 0; i < state.layers.size(); ++i)
    for (const auto& [name, t] : state.layers[i]->tensors())
      if (t.defined())
        EXPECT_EQ(t.storage()->nbytes(), static_cast<size_t>(t.numel()) * dtype_size(t.dtype()))
            << "layer " << i << " " << name << " " << t.describe();
}

double tolerance(DType dtype) { return dtype == kFloat64 ? 1e-9 : 1e-5; }

// prefill == T steps, for the state and the next-token logits; then 6 greedy tokens from either.
void expect_prefill_matches_steps(const Variant& v, int64_t length, DType dtype) {
  NoGradGuard no_grad;
  auto model = make_model(v, dtype, 11);
  Generator gen(100 + static_cast<uint64_t>(length));
  const Tensor ids = randint(0, kVocab, {2, length}, kCPU, &gen);
  LanguageModel::State stepped = model->init_state(2), prefilled = model->init_state(2);
  const Tensor by_steps = step_through(*model, ids, stepped);
  const Tensor at_once = model->prefill(ids, prefilled);
  expect_compact(prefilled);
  std::string worst;
  const double state = state_diff(prefilled, stepped, worst);
  const double logits = relative_diff(at_once, by_steps);
  std::printf("[prefill] %-24s %-7s T=%-5lld logits %.2e  state %.2e (%s)\n", v.name.c_str(), dtype_name(dtype),
              static_cast<long long>(length), logits, state, worst.c_str());
  EXPECT_LE(logits, tolerance(dtype)) << "next-token logits";
  EXPECT_LE(state, tolerance(dtype)) << "state: " << worst;
  EXPECT_EQ(greedy(*model, at_once, prefilled, 6), greedy(*model, by_steps, stepped, 6));
}

class PrefillEveryLetter : public ::testing::TestWithParam<std::tuple<Variant, int64_t>> {};

TEST_P(PrefillEveryLetter, StateAndLogitsEqualStepByStepInFloat64) {
  expect_prefill_matches_steps(std::get<0>(GetParam()), std::get<1>(GetParam()), kFloat64);
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<Variant, int64_t>>& info) {
  return std::get<0>(info.param).name + "_T" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Letters, PrefillEveryLetter,
                         ::testing::Combine(::testing::ValuesIn(every_letter()),
                                            ::testing::Values(1, 63, 64, 65, 1000)),
                         param_name);
INSTANTIATE_TEST_SUITE_P(OtherPaths, PrefillEveryLetter,
                         ::testing::Combine(::testing::ValuesIn(other_paths()), ::testing::Values(1, 64, 65, 200)),
                         param_name);

class PrefillFloat32 : public ::testing::TestWithParam<Variant> {};

// In float32 the two forms add in other orders: equal to rounding, the tokens the same.
TEST_P(PrefillFloat32, StateAndLogitsEqualStepByStepToRounding) {
  for (int64_t length : {65, 1000}) expect_prefill_matches_steps(GetParam(), length, kFloat32);
}

INSTANTIATE_TEST_SUITE_P(Letters, PrefillFloat32, ::testing::ValuesIn(every_letter()),
                         [](const ::testing::TestParamInfo<Variant>& info) { return info.param.name; });

class PrefillContinues : public ::testing::TestWithParam<Variant> {};

// A prompt prefilled in pieces, with steps between them, ends where the whole of it does token by
// token: prefill starts from any state, not only a fresh one.
TEST_P(PrefillContinues, FromAStateThatStepsAndPrefillsAdvanced) {
  NoGradGuard no_grad;
  auto model = make_model(GetParam(), kFloat64, 12);
  Generator gen(7);
  const Tensor ids = randint(0, kVocab, {3, 90}, kCPU, &gen);
  LanguageModel::State stepped = model->init_state(3), pieces = model->init_state(3);
  const Tensor by_steps = step_through(*model, ids, stepped);
  model->prefill(narrow(ids, 1, 0, 20), pieces);
  step_through(*model, narrow(ids, 1, 20, 3), pieces);
  model->prefill(narrow(ids, 1, 23, 1), pieces);
  const Tensor logits = model->prefill(narrow(ids, 1, 24, 66), pieces);
  std::string worst;
  EXPECT_LE(state_diff(pieces, stepped, worst), 1e-9) << worst;
  EXPECT_LE(relative_diff(logits, by_steps), 1e-9);
}

INSTANTIATE_TEST_SUITE_P(Letters, PrefillContinues, ::testing::ValuesIn(every_letter()),
                         [](const ::testing::TestParamInfo<Variant>& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(OtherPaths, PrefillContinues, ::testing::ValuesIn(other_paths()),
                         [](const ::testing::TestParamInfo<Variant>& info) { return info.param.name; });

class PrefillLast : public ::testing::TestWithParam<Variant> {};

// A model's last layer prefills through prefill_last (LanguageModel::prefill): its one output is
// the last row of what prefill gives, and it leaves the same state, from a fresh state and from
// one that has seen tokens already.
TEST_P(PrefillLast, IsTheLastRowOfPrefillWithTheSameState) {
  NoGradGuard no_grad;
  auto model = make_model(GetParam(), kFloat64, 14);
  SequenceMixer& mixer = *model->blocks()[0]->mixer;
  Generator gen(8);
  const Tensor before = randn({2, 5, 16}, kFloat64, &gen);
  for (int64_t length : {1, 37}) {
    const Tensor x = randn({2, length, 16}, kFloat64, &gen);
    for (bool seen_some : {false, true}) {
      std::unique_ptr<DecodeState> whole = mixer.init_state(2), last = mixer.init_state(2);
      if (seen_some) mixer.prefill(before, *whole), mixer.prefill(before, *last);
      const Tensor all_rows = mixer.prefill(x, *whole);
      const Tensor last_row = mixer.prefill_last(x, *last);
      const std::string where = "T=" + std::to_string(length) + (seen_some ? " after 5 tokens" : " from a fresh state");
      ASSERT_EQ(last_row.shape(), Shape({2, 1, 16})) << where;
      EXPECT_LE(relative_diff(last_row, narrow(all_rows, 1, length - 1, 1)), 1e-12) << where;
      const auto a = whole->tensors(), b = last->tensors();
      ASSERT_EQ(a.size(), b.size());
      for (size_t m = 0; m < a.size(); ++m) {
        ASSERT_EQ(a[m].second.defined(), b[m].second.defined()) << where << " " << a[m].first;
        if (a[m].second.defined())
          EXPECT_LE(relative_diff(a[m].second, b[m].second), 1e-12) << where << " " << a[m].first;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Letters, PrefillLast, ::testing::ValuesIn(every_letter()),
                         [](const ::testing::TestParamInfo<Variant>& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(OtherPaths, PrefillLast, ::testing::ValuesIn(other_paths()),
                         [](const ::testing::TestParamInfo<Variant>& info) { return info.param.name; });

class StackedStates : public ::testing::TestWithParam<Variant> {};

// Prompts of lengths 3, 12, 1 and 12 again (the second row repeated, as for several samples of
// one prompt), each prefilled alone, stacked into a batch of 4 and decoded 10 more tokens (fed,
// different per row): every row's logits are the ones it gets decoding alone.
TEST_P(StackedStates, EveryRowDecodesAsItWouldAlone) {
  NoGradGuard no_grad;
  auto model = make_model(GetParam(), kFloat64, 13);
  Generator gen(8);
  const std::vector<int64_t> lengths{3, 12, 1};
  std::vector<Tensor> prompts;
  std::vector<LanguageModel::State> alone;
  for (int64_t length : lengths) {
    prompts.push_back(randint(0, kVocab, {1, length}, kCPU, &gen));
    alone.push_back(model->init_state(1));
    model->prefill(prompts.back(), alone.back());
  }
  LanguageModel::State batch = model->stack_states({&alone[0], &alone[1], &alone[2], &alone[1]});
  // The stacked state copies; the rows' own states go on alone (row 1 twice, so a copy of it).
  LanguageModel::State alone_again = model->stack_states({&alone[1]});
  std::vector<LanguageModel::State*> rows{&alone[0], &alone[1], &alone[2], &alone_again};
  const Tensor fed = randint(0, kVocab, {4, 10}, kCPU, &gen);
  for (int64_t t = 0; t < 10; ++t) {
    const Tensor together = model->step(select(fed, 1, t), batch);  // (4, V)
    for (int64_t r = 0; r < 4; ++r) {
      const Tensor own = model->step(narrow(select(fed, 1, t), 0, r, 1), *rows[static_cast<size_t>(r)]);
      EXPECT_LE(relative_diff(narrow(together, 0, r, 1), own), 1e-9) << "row " << r << " step " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Letters, StackedStates, ::testing::ValuesIn(every_letter()),
                         [](const ::testing::TestParamInfo<Variant>& info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(OtherPaths, StackedStates, ::testing::ValuesIn(other_paths()),
                         [](const ::testing::TestParamInfo<Variant>& info) { return info.param.name; });

// Without a gradient, a block's two residual additions go into the products that end its halves
// (SequenceMixer::residual_prefill, FeedForward::residual_prefill: add_product_into): the output is
// written over x's memory, the running sum LanguageModel::prefill gives it, and equals the sums
// made out of place while a gradient is recorded. prefill_last writes x's last token. For the
// letters whose layers fold it (softmax, ReGLA, Fast Decay, GLA) and one that does not (DeltaNet),
// with the plain MLP and a gated one.
class PrefillIntoTheRunningSum : public ::testing::TestWithParam<std::tuple<char, MlpKind>> {};

TEST_P(PrefillIntoTheRunningSum, BlocksAddIntoXWithoutAGradient) {
  const auto [letter, mlp] = GetParam();
  ModelConfig c;
  c.vocab_size = kVocab;
  c.d_model = 16;
  c.heads = 2;
  c.pattern = std::string(1, letter);
  c.mlp = mlp;
  Generator init(19);
  LanguageModel model(c, init);
  model.to(kFloat64);
  model.eval();
  Block& block = *model.blocks()[0];
  Generator gen(20);
  const Tensor x = randn({1, 40, 16}, kFloat64, &gen);
  for (const bool last_only : {false, true}) {
    auto prefill = [&](const Tensor& input, DecodeState& state) {
      return last_only ? block.prefill_last(input, state) : block.prefill(input, state);
    };
    const auto recorded_state = block.mixer->init_state(1);
    const Tensor reference = prefill(clone(x), *recorded_state);  // the parameters need a gradient
    ASSERT_TRUE(reference.requires_grad());
    const NoGradGuard no_grad;
    const auto state = block.mixer->init_state(1);
    const Tensor sum = clone(x);
    const Tensor out = prefill(sum, *state);
    const bool folds = letter != 'D';
    const void* expected_at = last_only ? last_token(sum).raw_data() : sum.raw_data();
    EXPECT_EQ(out.raw_data() == expected_at, folds) << (last_only ? "prefill_last" : "prefill");
    EXPECT_TRUE(linea::testing::all_close(out, reference, 1e-12, 1e-12)) << (last_only ? "prefill_last" : "prefill");
  }
}

INSTANTIATE_TEST_SUITE_P(Letters, PrefillIntoTheRunningSum,
                         ::testing::Combine(::testing::Values('S', 'R', 'F', 'G', 'D'),
                                            ::testing::Values(MlpKind::GeluTanh, MlpKind::SwiGLU)));

TEST(Prefill, RefusesBadInput) {
  auto model = make_model({"RS", "RS"}, kFloat64, 1);
  LanguageModel::State state = model->init_state(2);
  EXPECT_LINEA_ERROR(model->prefill(zeros({2, 0}, kInt64), state), "prefill", "at least one token");
  EXPECT_LINEA_ERROR(model->prefill(zeros({2}, kInt64), state), "prefill", "(batch, time)");
  EXPECT_LINEA_ERROR(model->prefill(zeros({2, 3}), state), "int64 token ids");
  EXPECT_LINEA_ERROR(model->prefill(zeros({3, 4}, kInt64), state), "state is for batch 2");
  LanguageModel::State wrong;
  EXPECT_LINEA_ERROR(model->prefill(zeros({2, 4}, kInt64), wrong), "decoding state has 0 layers");
  EXPECT_LINEA_ERROR(model->stack_states({}), "stack_states", "at least one");
}

// A cache stacked from sequences of different lengths decodes, but a prompt cannot be appended to
// it in one pass: its rows would need different positions within the pass.
TEST(Prefill, RefusesARaggedKvCache) {
  auto model = make_model({"S", "S"}, kFloat64, 2);
  LanguageModel::State a = model->init_state(1), b = model->init_state(1);
  model->prefill(zeros({1, 2}, kInt64), a);
  model->prefill(zeros({1, 5}, kInt64), b);
  LanguageModel::State both = model->stack_states({&a, &b});
  EXPECT_LINEA_ERROR(model->prefill(zeros({2, 3}, kInt64), both), "SoftmaxAttention", "different lengths");
  EXPECT_NO_THROW(model->step(zeros({2}, kInt64), both));
}

// A state reserved for N tokens (the KV caches allocated once, written in place) decodes as one
// that grows, prefill and steps, with a window's ring and without; token N + 1 is an error that
// comes before any layer runs; a reserve below the tokens seen is an error too.
TEST(Reserve, AReservedStateDecodesAsAGrowingOneUpToItsSize) {
  NoGradGuard no_grad;
  for (const char* layers : {"{}", R"({"S": {"window": 5}})"}) {
    auto model = make_model({"RS", "RS", layers}, kFloat64, 4);
    Generator gen(5);
    const Tensor ids = randint(0, kVocab, {2, 12}, kCPU, &gen);
    LanguageModel::State growing = model->init_state(2), reserved = model->init_state(2);
    model->prefill(narrow(ids, 1, 0, 4), growing);
    model->prefill(narrow(ids, 1, 0, 2), reserved);
    model->reserve(reserved, 12);
    model->prefill(narrow(ids, 1, 2, 2), reserved);
    for (int64_t t = 4; t < 12; ++t) {
      const Tensor want = model->step(select(ids, 1, t), growing), got = model->step(select(ids, 1, t), reserved);
      EXPECT_LE(relative_diff(got, want), 1e-12) << layers << " token " << t;
    }
    EXPECT_LINEA_ERROR(model->step(select(ids, 1, 0), reserved), "LanguageModel", "layer 1", "reserved for 12 tokens",
                       "token 13");
    EXPECT_LINEA_ERROR(model->prefill(narrow(ids, 1, 0, 1), reserved), "reserved for 12 tokens");
    for (const auto& layer : reserved.layers) EXPECT_EQ(layer->position, 12) << layers;
    LanguageModel::State small = model->init_state(2);
    model->prefill(narrow(ids, 1, 0, 6), small);
    EXPECT_LINEA_ERROR(model->reserve(small, 5), "reserve", "seen 6 tokens");
  }
}

TEST(Prefill, StackingRefusesAnotherLayersState) {
  auto softmax = make_model({"S", "S"}, kFloat64, 3), regla = make_model({"R", "R"}, kFloat64, 3);
  const LanguageModel::State s = softmax->init_state(1), r = regla->init_state(1);
  EXPECT_LINEA_ERROR(softmax->stack_states({&s, &r}), "stack_states", "init_state");
  EXPECT_LINEA_ERROR(regla->stack_states({&r, &s}), "stack_states", "init_state");
}

}  // namespace
}  // namespace linea::nn
