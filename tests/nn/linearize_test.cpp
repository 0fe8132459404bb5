// Post-linearization's model side (nn/linearize.h): every weight that carries over is copied
// exactly (o_proj -> out_proj), the new layers keep their own initialisation, a linearized hybrid
// still decodes token by token exactly as its parallel form, and whatever cannot carry over is an
// error naming the layer and the shapes.
#include "nn/linearize.h"
#include "tests/test_util.h"

namespace linea::nn {
namespace {

using linea::testing::all_close;

ModelConfig config(const std::string& pattern) {
  ModelConfig c;
  c.vocab_size = 13;
  c.d_model = 16;
  c.heads = 2;
  c.mlp_hidden = 24;
  c.pattern = pattern;
  return c;
}

TEST(Linearize, CopiedWeightsEqualTheSourceAndNewOnesKeepTheirInit) {
  for (const char* to : {"RR", "GL", "DS"}) {
    Generator source_gen(1), target_gen(2), fresh_gen(2);
    LanguageModel source(config("SS"), source_gen);
    LanguageModel target(config(to), target_gen);
    LanguageModel fresh(config(to), fresh_gen);  // target's weights before the copy
    const StateDict weights = source.state_dict();
    const Linearization lin = copy_linearized_weights(config("SS"), weights, target);
    EXPECT_EQ(lin.replaced, (to == std::string("DS") ? std::vector<int64_t>{0} : std::vector<int64_t>{0, 1})) << to;
    const StateDict after = target.state_dict(), before = fresh.state_dict();
    ASSERT_EQ(lin.origins.size(), after.size());
    int copied = 0, kept = 0;
    for (const WeightOrigin& w : lin.origins) {
      if (w.source.empty()) {
        EXPECT_TRUE(all_close(after.at(w.name), before.at(w.name), 0, 0)) << w.name;
        EXPECT_NE(w.name.find(".mixer."), std::string::npos) << w.name << " should have been copied";
        ++kept;
      } else {
        EXPECT_TRUE(all_close(after.at(w.name), weights.at(w.source), 0, 0)) << w.name;
        ++copied;
      }
    }
    EXPECT_GT(kept, 0) << to;  // the gates, norms and maps of the new layers
    EXPECT_EQ(copied, static_cast<int>(weights.size())) << to;  // every source weight lands somewhere
  }
  // The output projection is renamed; q, k, v keep their names.
  Generator a(1), b(2);
  LanguageModel source(config("SS"), a), target(config("RS"), b);
  const Linearization lin = copy_linearized_weights(config("SS"), source.state_dict(), target);
  std::map<std::string, std::string> from;
  for (const WeightOrigin& w : lin.origins) from[w.name] = w.source;
  EXPECT_EQ(from.at("blocks.0.mixer.out_proj.weight"), "blocks.0.mixer.o_proj.weight");
  EXPECT_EQ(from.at("blocks.0.mixer.k_proj.weight"), "blocks.0.mixer.k_proj.weight");
  EXPECT_EQ(from.at("blocks.1.mixer.o_proj.weight"), "blocks.1.mixer.o_proj.weight");
  EXPECT_EQ(from.at("blocks.0.mixer.gate.forget_proj.up.weight"), "");
}

// SSSS -> SRSR, the hybrid: softmax layers from their KV cache, ReGLA from its state.
TEST(Linearize, ALinearizedHybridDecodesAsItsParallelForm) {
  Generator source_gen(3), target_gen(4);
  LanguageModel source(config("SSSS"), source_gen);
  LanguageModel hybrid(config("SRSR"), target_gen);
  copy_linearized_weights(config("SSSS"), source.state_dict(), hybrid);
  hybrid.to(kFloat64);
  const Tensor ids = randint(0, 13, {2, 10}, kCPU, &target_gen);
  const Tensor full = hybrid.forward(ids);
  auto state = hybrid.init_state(2);
  std::vector<Tensor> steps;
  for (int64_t t = 0; t < 10; ++t) steps.push_back(hybrid.step(select(ids, 1, t), state));
  EXPECT_TRUE(all_close(stack(steps, 1), full, 1e-9, 1e-11));
}

TEST(Linearize, RefusesWhatCannotCarryOver) {
  Generator gen(5);
  LanguageModel source(config("SS"), gen);
  const StateDict weights = source.state_dict();
  auto attempt = [&](const ModelConfig& from, const ModelConfig& to, const StateDict& w) {
    LanguageModel target(to, gen);
    copy_linearized_weights(from, w, target);
  };
  EXPECT_LINEA_ERROR(attempt(config("SS"), config("RRR"), weights), "RRR has 3 layers", "SS has 2");
  EXPECT_LINEA_ERROR(attempt(config("SS"), config("SU"), weights), "layer 1", "letter U (griffin)", "no projection");
  EXPECT_LINEA_ERROR(attempt(config("SS"), config("SS"), weights), "no softmax layer to replace");
  ModelConfig wider = config("RR");
  wider.mlp_hidden = 32;
  EXPECT_LINEA_ERROR(attempt(config("SS"), wider, weights), "mlp_hidden is 32", "trained model's is 24");

  // Only softmax layers are replaced.
  Generator g2(6);
  LanguageModel linear(config("RS"), g2);
  EXPECT_LINEA_ERROR(attempt(config("RS"), config("SR"), linear.state_dict()), "layer 0 is regla (R)",
                     "only softmax layers (S)");

  // Grouped-query softmax heads: k_proj is narrower than the linear layer's.
  ModelConfig gqa = config("SS");
  gqa.layers = json::parse(R"({"S": {"kv_heads": 1}})");
  Generator g3(7);
  LanguageModel gqa_model(gqa, g3);
  EXPECT_LINEA_ERROR(attempt(gqa, config("RS"), gqa_model.state_dict()), "blocks.0.mixer.k_proj.weight is [8, 16]",
                     "new model's blocks.0.mixer.k_proj.weight is [16, 16]");

  // A softmax bias with no place in the new layer.
  ModelConfig biased = config("SS");
  StateDict with_bias = weights;
  with_bias["blocks.0.mixer.q_proj.bias"] = zeros({16});
  EXPECT_LINEA_ERROR(attempt(biased, config("RS"), with_bias), "'blocks.0.mixer.q_proj.bias' has no place");
}

}  // namespace
}  // namespace linea::nn
