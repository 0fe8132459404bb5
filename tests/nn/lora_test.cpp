// LoRA (nn/layers/lora.h): an adapted layer starts equal to its base, the adapters go where the
// targets say, a model config carries them through JSON, and merging them into the weights
// gives a plain model with the same outputs. The gradient check is a row of the table
// (nn/gradcheck_cases_layers.cpp, "Linear/lora").
#include "nn/init.h"
#include "nn/layers/lora.h"
#include "nn/model.h"
#include "tests/test_util.h"

namespace linea::nn {
namespace {

using linea::testing::all_close;

ModelConfig config_with_lora(const std::string& pattern, const std::string& targets) {
  ModelConfig c;
  c.vocab_size = 11;
  c.d_model = 16;
  c.heads = 2;
  c.mlp_hidden = 24;
  c.pattern = pattern;
  c.lora = {.rank = 3, .alpha = 6.0, .targets = targets};
  return c;
}

// B starts at zero, which hides A from every check; random B makes the update count.
void randomize_adapters(const Module& model, Generator& gen) {
  for (NamedParameter p : model.named_parameters())
    if (is_lora_parameter(p.name) && p.name.back() == 'B') {
      NoGradGuard no_grad;
      init::normal_(p.tensor, 0.0, 0.3, gen);
    }
}

TEST(Lora, AnAdaptedLinearStartsEqualToItsBase) {
  Generator gen(1);
  Linear linear(5, 4, gen);
  const Tensor x = randn({3, 5}, kFloat32, &gen);
  const Tensor before = linear.forward(x);
  linear.add_lora(2, 8.0, gen);
  EXPECT_TRUE(all_close(linear.forward(x), before, 0, 0));
  EXPECT_EQ(linear.lora->A.shape(), (Shape{2, 5}));
  EXPECT_EQ(linear.lora->B.shape(), (Shape{4, 2}));
  EXPECT_DOUBLE_EQ(linear.lora->scale(), 4.0);
  EXPECT_LINEA_ERROR(linear.add_lora(2, 8.0, gen), "already has a LoRA adapter");
}

TEST(Lora, TargetsNameTheMixersProjectionsAndTheMlp) {
  Generator gen(2);
  LanguageModel model(config_with_lora("SR", "q,o,mlp"), gen);
  std::set<std::string> adapted;
  for (const NamedParameter& p : model.named_parameters())
    if (is_lora_parameter(p.name) && p.name.back() == 'A') adapted.insert(p.name.substr(0, p.name.size() - 7));
  // "o" is o_proj in softmax attention and out_proj in the linear family.
  const std::set<std::string> expected = {"blocks.0.mixer.q_proj", "blocks.0.mixer.o_proj", "blocks.0.mlp.gate",
                                          "blocks.0.mlp.up",       "blocks.0.mlp.down",     "blocks.1.mixer.q_proj",
                                          "blocks.1.mixer.out_proj", "blocks.1.mlp.gate",  "blocks.1.mlp.up",
                                          "blocks.1.mlp.down"};
  EXPECT_EQ(adapted, expected);
}

TEST(Lora, TheBaseWeightsAreDrawnAsWithoutAdapters) {
  ModelConfig plain = config_with_lora("SR", "q,k,v,o");
  plain.lora = {};
  Generator a(3), b(3);
  LanguageModel with(config_with_lora("SR", "q,k,v,o"), a), without(plain, b);
  const StateDict adapted = with.state_dict();
  for (const auto& [name, t] : without.state_dict()) EXPECT_TRUE(all_close(adapted.at(name), t, 0, 0)) << name;
}

TEST(Lora, MergedWeightsGiveTheUnmergedOutputs) {
  Generator gen(4);
  const ModelConfig config = config_with_lora("SRS", "q,k,v,o,mlp");
  LanguageModel adapted(config, gen);
  randomize_adapters(adapted, gen);
  adapted.to(kFloat64);
  ModelConfig plain_config = config;
  plain_config.lora = {};
  Generator other(99);
  LanguageModel merged(plain_config, other);
  merged.to(kFloat64);
  merged.load_state_dict(merge_lora(adapted.state_dict(), config.lora));  // strict: no adapter is left
  const Tensor ids = randint(0, 11, {2, 9}, kCPU, &gen);
  const Tensor expected = adapted.forward(ids);
  EXPECT_TRUE(all_close(merged.forward(ids), expected, 1e-10, 1e-12));
  // The update did matter: the base weights alone give other outputs.
  LanguageModel base(plain_config, other);
  base.to(kFloat64);
  StateDict base_weights;
  for (const auto& [name, t] : adapted.state_dict())
    if (!is_lora_parameter(name)) base_weights[name] = t;
  base.load_state_dict(base_weights);
  EXPECT_FALSE(all_close(base.forward(ids), expected, 1e-6, 1e-6));
}

TEST(Lora, ConfigRoundTripsThroughJson) {
  const ModelConfig c = config_with_lora("RS", "v,mlp");
  const ModelConfig back = ModelConfig::from_json(c.to_json());
  EXPECT_EQ(back.lora.rank, 3);
  EXPECT_EQ(back.lora.alpha, 6.0);
  EXPECT_EQ(back.lora.targets, "v,mlp");
  ModelConfig plain = c;
  plain.lora = {};
  EXPECT_FALSE(plain.to_json().contains("lora"));  // configs without LoRA are as before
}

TEST(Lora, RefusesBadConfigs) {
  Generator gen(5);
  EXPECT_LINEA_ERROR(LanguageModel(config_with_lora("R", "q,x"), gen), "unknown target 'x'", "q, k, v, o, mlp");
  EXPECT_LINEA_ERROR(LanguageModel(config_with_lora("R", "q,q"), gen), "'q' is given twice");
  ModelConfig c = config_with_lora("R", "q");
  c.lora.rank = -1;
  EXPECT_LINEA_ERROR(c.validate(), "rank must be >= 0");
  c.lora = {.rank = 2, .alpha = 0.0};
  EXPECT_LINEA_ERROR(c.validate(), "alpha must be positive");
  // The Griffin block has no q/k/v/o projections.
  EXPECT_LINEA_ERROR(LanguageModel(config_with_lora("U", "q,k"), gen), "name no layer of the pattern U");
  json::Value v = config_with_lora("R", "q").to_json();
  v["lora"]["dropout"] = 0.1;
  EXPECT_LINEA_ERROR(ModelConfig::from_json(v), "unknown key \"lora.dropout\"");
}

TEST(Lora, MergeNamesAnAdapterWithoutItsWeight) {
  Generator gen(6);
  StateDict state = {{"x.lora.A", randn({2, 4}, kFloat32, &gen)}, {"x.lora.B", zeros({3, 2})}};
  EXPECT_LINEA_ERROR(merge_lora(state, {.rank = 2}), "'x.lora.A' has no x.weight");
  state["x.weight"] = zeros({3, 5});
  EXPECT_LINEA_ERROR(merge_lora(state, {.rank = 2}), "does not fit its weight");
}

}  // namespace
}  // namespace linea::nn
