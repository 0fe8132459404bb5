// The decode step replayed from a CUDA graph (train/decode_graph.h): for every layer letter whose
// state keeps its shape, the replayed steps give the eager steps' logits and states bit for bit,
// with other allocations made and freed between replays (so a graph pool handing its blocks out
// would show); softmax attention once its KV cache is reserved (written in place by the step),
// and refused, with the reason, while it may still grow; replaying past the reserve is an error;
// with the draw captured too, the same ids as the eager step and draw (and each kind of graph
// refuses the other's way of stepping); generate() draws the same tokens with and without the graph.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/model.h"
#include "tests/cuda/parity.h"
#include "tests/nn/decode_states.h"
#include "train/decode_graph.h"
#include "train/generate.h"

namespace linea::testing {
namespace {

constexpr int64_t kVocab = 29;
constexpr int64_t kReserved = 7 + 12;  // the prompt and the steps of a parity test

std::unique_ptr<nn::LanguageModel> tiny_model(const std::string& pattern, DType dtype, Device device) {
  nn::ModelConfig c;
  c.vocab_size = kVocab;
  c.d_model = 24;
  c.heads = 2;
  c.pattern = pattern;
  Generator init(41);
  auto model = std::make_unique<nn::LanguageModel>(c, init);
  model->to(dtype);
  model->to(device);
  return model;
}

// Prefills `batch` random prompts of 7 tokens on the GPU.
nn::LanguageModel::State prefilled(nn::LanguageModel& model, int64_t batch, Generator& data) {
  nn::LanguageModel::State state = model.init_state(batch);
  model.prefill(to(randint(0, kVocab, {batch, 7}, kCPU, &data), gpu()), state);
  return state;
}

TEST(DecodeGraph, CpuDecodesEagerly) {
  const auto owned = tiny_model("R", kFloat64, kCPU);
  nn::LanguageModel& model = *owned;
  nn::LanguageModel::State state = model.init_state(1);
  std::string why;
  EXPECT_EQ(train::DecodeGraph::capture(model, state, 1, kCPU, &why), nullptr);
  EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
}

struct Case {
  char letter;
  DType dtype;
  int64_t batch;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(1, info.param.letter) + (info.param.dtype == kFloat64 ? "_f64" : "_f32") + "_b" +
         std::to_string(info.param.batch);
}

// A prefilled state and the same state in its own memory, both reserved for a parity test's steps:
// one for the eager steps, one for the graph.
std::pair<nn::LanguageModel::State, nn::LanguageModel::State> twin_states(nn::LanguageModel& model, int64_t batch,
                                                                          Generator& data) {
  nn::LanguageModel::State eager = prefilled(model, batch, data);
  nn::LanguageModel::State graphed = model.stack_states({&eager});
  model.reserve(eager, kReserved);
  model.reserve(graphed, kReserved);
  return {std::move(eager), std::move(graphed)};
}

class DecodeGraphParity : public ::testing::TestWithParam<Case> {
 protected:
  // Two layers of the case's letter, in its dtype, on the GPU.
  static std::unique_ptr<nn::LanguageModel> case_model() {
    return tiny_model(std::string(2, GetParam().letter), GetParam().dtype, gpu());
  }
};

TEST_P(DecodeGraphParity, ReplaysGiveTheEagerStepsExactly) {
  LINEA_SKIP_WITHOUT_CUDA();
  const auto [letter, dtype, batch] = GetParam();
  const auto owned = case_model();
  nn::LanguageModel& model = *owned;
  NoGradGuard no_grad;
  Generator data(7);
  auto [eager, graphed] = twin_states(model, batch, data);
  std::string why;
  std::unique_ptr<train::DecodeGraph> graph = train::DecodeGraph::capture(model, graphed, batch, gpu(), &why);
  ASSERT_NE(graph, nullptr) << why;
  EXPECT_GT(graph->node_count(), 10u);  // embedding, two layers, the head: many kernels in one launch
  EXPECT_LINEA_ERROR(graph->step_and_draw(to(randint(0, kVocab, {batch}, kCPU, &data), gpu()),
                                          to(rand({batch}, kFloat64, &data), gpu())),
                     "DecodeGraph", "without a draw");
  std::string worst;
  EXPECT_EQ(state_diff(eager, graphed, worst), 0.0) << "capturing changed the state: " << worst;

  std::vector<Tensor> others;  // allocations between replays, some kept, of the sizes the step uses
  for (int t = 0; t < 12; ++t) {
    const Tensor ids = to(randint(0, kVocab, {batch}, kCPU, &data), gpu());
    const Tensor want = to(model.step(ids, eager), kCPU);
    const Tensor got = to(graph->step(ids), kCPU);
    ASSERT_EQ(relative_diff(got, want), 0.0) << "step " << t;
    others.push_back(to(randn({batch, 24}, dtype, &data), gpu()));
    others.push_back(to(randn({batch, kVocab}, dtype, &data), gpu()));
    if (t % 3 == 0) others.clear();
  }
  EXPECT_EQ(state_diff(eager, graphed, worst), 0.0) << worst;
}


// With the draw in the graph, every step's logits and ids are the eager step's and
// sample_tokens', greedy and sampled; the ids a step returns stay put through the next step (so a
// copy to the host may run beside it); ids from elsewhere are copied in.
TEST_P(DecodeGraphParity, DrawsTheEagerTokensAndKeepsThemThroughTheNextStep) {
  LINEA_SKIP_WITHOUT_CUDA();
  const int64_t batch = GetParam().batch;
  const auto owned = case_model();
  nn::LanguageModel& model = *owned;
  NoGradGuard no_grad;
  for (const SamplingParams& params :
       {SamplingParams{.temperature = 0}, SamplingParams{.temperature = 0.8, .top_k = 6, .top_p = 0.9}}) {
    Generator data(9);
    auto [eager, graphed] = twin_states(model, batch, data);
    std::string why;
    std::unique_ptr<train::DecodeGraph> graph =
        train::DecodeGraph::capture(model, graphed, batch, gpu(), &why, params);
    ASSERT_NE(graph, nullptr) << why;
    Tensor eager_ids = to(randint(0, kVocab, {batch}, kCPU, &data), gpu());
    Tensor graph_ids = clone(eager_ids);
    const Tensor u0 = to(rand({batch}, kFloat64, &data), gpu());
    EXPECT_LINEA_ERROR(graph->step(graph_ids), "DecodeGraph", "draws the next ids itself");
    EXPECT_LINEA_ERROR(graph->step_and_draw(graph_ids, to(rand({batch + 1}, kFloat64, &data), gpu())), "DecodeGraph",
                       "uniforms");
    EXPECT_LINEA_ERROR(graph->step_and_draw(to(graph_ids, kFloat32), u0), "DecodeGraph", "ids");
    Tensor before;  // the ids the step before returned, and what they must still hold
    std::vector<int64_t> before_values;
    for (int t = 0; t < 12; ++t) {
      const Tensor u = to(rand({batch}, kFloat64, &data), gpu());
      const Tensor logits = model.step(eager_ids, eager);
      eager_ids = sample_tokens(logits, u, params);
      graph_ids = graph->step_and_draw(graph_ids, u);
      ASSERT_EQ(relative_diff(to(graph->logits(), kCPU), to(logits, kCPU)), 0.0) << "step " << t;
      const std::vector<int64_t> want = to(eager_ids, kCPU).to_vector<int64_t>();
      ASSERT_EQ(to(graph_ids, kCPU).to_vector<int64_t>(), want) << "step " << t;
      if (before.defined())
        ASSERT_EQ(to(before, kCPU).to_vector<int64_t>(), before_values) << "step " << t << " overwrote the ids before";
      before = graph_ids;
      before_values = want;
      if (t == 6) graph_ids = clone(graph_ids);  // not the graph's own: copied in
    }
    std::string worst;
    EXPECT_EQ(state_diff(eager, graphed, worst), 0.0) << worst;
  }
}


std::vector<Case> every_letter() {
  std::vector<Case> cases;
  for (const nn::LayerKind& kind : nn::layer_kinds()) {
    cases.push_back({kind.letter, kFloat32, 1});
    cases.push_back({kind.letter, kFloat64, 3});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Letters, DecodeGraphParity, ::testing::ValuesIn(every_letter()),
                         case_name);

// A KV cache that may still grow is refused, the state left as it was; reserved, it is captured,
// and replaying past the reserve is an error, as an eager step past it is.
TEST(DecodeGraph, TheReserveDecidesWhetherAKvCacheCanBeReplayed) {
  LINEA_SKIP_WITHOUT_CUDA();
  const auto owned = tiny_model("RS", kFloat32, gpu());
  nn::LanguageModel& model = *owned;
  NoGradGuard no_grad;
  Generator data(8);
  nn::LanguageModel::State state = prefilled(model, 2, data);
  nn::LanguageModel::State before = model.stack_states({&state});
  std::string why;
  EXPECT_EQ(train::DecodeGraph::capture(model, state, 2, gpu(), &why), nullptr);
  EXPECT_NE(why.find("layer 1"), std::string::npos) << why;
  EXPECT_NE(why.find("may still grow"), std::string::npos) << why;
  std::string worst;
  EXPECT_EQ(state_diff(before, state, worst), 0.0) << worst;

  model.reserve(state, 9);
  std::unique_ptr<train::DecodeGraph> graph = train::DecodeGraph::capture(model, state, 2, gpu(), &why);
  ASSERT_NE(graph, nullptr) << why;
  const Tensor ids = to(randint(0, kVocab, {2}, kCPU, &data), gpu());
  graph->step(ids);
  graph->step(ids);  // tokens 8 and 9 of 9
  EXPECT_LINEA_ERROR(graph->step(ids), "DecodeGraph", "layer 1", "reserved for 9 tokens");
  EXPECT_LINEA_ERROR(model.step(ids, state), "LanguageModel", "layer 1", "reserved for 9 tokens", "token 10");
  EXPECT_EQ(state.position, 9);
  EXPECT_EQ(state.layers[0]->position, 9);  // the error came before any layer ran
}

TEST(DecodeGraph, GenerateDrawsTheSameTokensWithAndWithoutIt) {
  LINEA_SKIP_WITHOUT_CUDA();
  const auto owned = tiny_model("RS", kFloat32, gpu());
  nn::LanguageModel& model = *owned;
  const std::vector<train::Request> requests = {{{1, 2, 3}, 5}, {{4, 5, 6, 7, 8}, 6}};
  for (const double temperature : {0.0, 0.9}) {
    train::SampleOptions o;
    o.tokens = 300;  // past a block of uniforms (256 steps)
    o.temperature = temperature;
    o.top_k = 12;
    o.graph = true;
    const auto graphed = train::generate(model, requests, o, gpu());
    o.graph = false;
    const auto eager = train::generate(model, requests, o, gpu());
    EXPECT_EQ(graphed, eager) << "temperature " << temperature;
  }
}

}  // namespace
}  // namespace linea::testing
