// Multiple-choice scoring (train/choices.h) on items the test generates: every ending's score is
// the log-likelihood the model's recurrent form gives it token by token (an independent path to
// the parallel forward the scorer runs), the predictions and accuracies follow from those scores,
// k-shot prompts are other items drawn by the seed, and bad files and text are named errors.
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nn/model.h"
#include "tests/test_util.h"
#include "tests/train/temp_dir.h"
#include "train/byte_tokenizer.h"
#include "train/char_tokenizer.h"
#include "train/choices.h"
#include "train/file_io.h"

namespace linea::train {
namespace {

using linea::testing::TempDir;

std::string random_word(Generator& gen, int64_t length) {
  std::string word;
  const auto letters = randint(0, 26, {length}, kCPU, &gen).to_vector<int64_t>();
  for (int64_t c : letters) word += static_cast<char>('a' + c);
  return word;
}

std::vector<ChoiceItem> random_items(int64_t count, Generator& gen) {
  std::vector<ChoiceItem> items;
  for (int64_t i = 0; i < count; ++i) {
    ChoiceItem item;
    item.context = random_word(gen, 3 + i % 4) + " " + random_word(gen, 2);
    for (int64_t e = 0; e < 2 + i % 3; ++e) item.endings.push_back(" " + random_word(gen, 1 + (e + i) % 4));
    item.label = i % static_cast<int64_t>(item.endings.size());
    items.push_back(item);
  }
  return items;
}

std::unique_ptr<nn::LanguageModel> byte_model(Generator& init) {
  nn::ModelConfig c;
  c.vocab_size = 256;
  c.d_model = 16;
  c.heads = 2;
  c.pattern = "SR";
  auto model = std::make_unique<nn::LanguageModel>(c, init);
  model->to(kFloat64);
  return model;
}

// log p(ending | prompt) by the decoding form: one token at a time through step().
double stepwise_log_likelihood(nn::LanguageModel& model, const std::vector<int64_t>& prompt,
                               const std::vector<int64_t>& ending) {
  NoGradGuard no_grad;
  std::vector<int64_t> ids = prompt;
  ids.insert(ids.end(), ending.begin(), ending.end());
  auto state = model.init_state(1);
  double total = 0;
  for (size_t t = 0; t + 1 < ids.size(); ++t) {
    const Tensor logits = model.step(from_vector(std::vector<int64_t>{ids[t]}, {1}), state);  // (1, V)
    if (t + 1 >= prompt.size()) total += log_softmax(logits, -1).to_vector<double>()[ids[t + 1]];
  }
  return total;
}

TEST(Choices, ScoresAreTheLogLikelihoodsTheDecodingFormGives) {
  Generator init(3), data(4);
  const auto owned = byte_model(init);
  nn::LanguageModel& model = *owned;
  const ByteTokenizer tokenizer;
  const std::vector<ChoiceItem> items = random_items(7, data);
  for (int64_t shots : {0, 2}) {
    const ChoiceResult r = score_choices(model, tokenizer, items, shots, 11, kCPU, "generated");
    ASSERT_EQ(r.items.size(), items.size());
    int64_t right = 0, right_norm = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      const auto prompt = tokenizer.encode(few_shot_prompt(items, i, shots, 11));
      std::vector<double> per_byte;
      for (size_t e = 0; e < items[i].endings.size(); ++e) {
        const double expected = stepwise_log_likelihood(model, prompt, tokenizer.encode(items[i].endings[e]));
        EXPECT_NEAR(r.items[i].log_likelihoods[e], expected, 1e-9) << "item " << i << " ending " << e;
        per_byte.push_back(expected / static_cast<double>(items[i].endings[e].size()));
      }
      const auto& ll = r.items[i].log_likelihoods;
      EXPECT_EQ(r.items[i].predicted, std::max_element(ll.begin(), ll.end()) - ll.begin());
      EXPECT_EQ(r.items[i].predicted_norm, std::max_element(per_byte.begin(), per_byte.end()) - per_byte.begin());
      right += r.items[i].predicted == items[i].label;
      right_norm += r.items[i].predicted_norm == items[i].label;
    }
    EXPECT_DOUBLE_EQ(r.acc, static_cast<double>(right) / 7);
    EXPECT_DOUBLE_EQ(r.acc_norm, static_cast<double>(right_norm) / 7);
  }
}

TEST(Choices, FewShotPromptsAreOtherItemsSolvedDrawnBySeed) {
  Generator data(5);
  const std::vector<ChoiceItem> items = random_items(6, data);
  EXPECT_EQ(few_shot_prompt(items, 2, 0, 1), items[2].context);
  std::set<std::string> prompts;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    const std::string prompt = few_shot_prompt(items, 4, 3, seed);
    EXPECT_EQ(prompt, few_shot_prompt(items, 4, 3, seed)) << "a seed gives one prompt";
    prompts.insert(prompt);
    ASSERT_TRUE(prompt.size() > items[4].context.size() &&
                prompt.compare(prompt.size() - items[4].context.size(), std::string::npos, items[4].context) == 0);
    // Three solved shots, each another item's context and right ending, none repeated.
    std::set<size_t> used;
    size_t at = 0;
    for (int s = 0; s < 3; ++s) {
      bool found = false;
      for (size_t j = 0; j < items.size() && !found; ++j) {
        const std::string shot = items[j].context + items[j].endings[items[j].label] + "\n\n";
        if (j != 4 && prompt.compare(at, shot.size(), shot) == 0) found = true, used.insert(j), at += shot.size();
      }
      EXPECT_TRUE(found) << "shot " << s << " of seed " << seed << " is not another item, solved: " << prompt;
    }
    EXPECT_EQ(used.size(), 3u);
    EXPECT_EQ(at + items[4].context.size(), prompt.size());
  }
  EXPECT_GT(prompts.size(), 1u) << "the seed should change the shots";
  EXPECT_LINEA_ERROR(few_shot_prompt(items, 0, 6, 0), "6-shot prompts need more than 6 items");
}

TEST(Choices, BadFilesAreErrorsNamingTheLine) {
  const TempDir dir;
  auto expect_error = [&](const std::string& text, std::initializer_list<const char*> fragments) {
    write_file_atomically(dir / "items.jsonl", text);
    try {
      read_choice_items(dir / "items.jsonl");
      ADD_FAILURE() << "no error for: " << text;
    } catch (const Error& e) {
      for (const char* f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
    }
  };
  const std::string good = R"({"context": "a", "endings": ["b", "c"], "label": 1})";
  expect_error(good + "\n\n" + R"({"context": "a", "endings": ["b", "c"], "label": 2})", {"line 3", "label 2"});
  expect_error(good + "\n{\"context\": ", {"line 2"});
  expect_error(R"({"context": "a", "endings": ["b"], "label": 0})", {"line 1", "at least two"});
  expect_error(R"({"context": "a", "endings": ["b", 3], "label": 0})", {"line 1", "ending 1"});
  expect_error(R"({"context": "a", "endings": ["b", "c"], "label": 0, "gold": 1})", {"unknown key 'gold'"});
  expect_error(R"({"endings": ["b", "c"], "label": 0})", {"context"});
  expect_error("\n  \n", {"holds no items"});
  write_file_atomically(dir / "items.jsonl", good + "\n" + good + "\n");
  EXPECT_EQ(read_choice_items(dir / "items.jsonl").size(), 2u);
}

TEST(Choices, TextTheTokenizerCannotEncodeIsRefused) {
  Generator init(7), data(8);
  const CharTokenizer tokenizer = CharTokenizer::from_text("abc d");
  nn::ModelConfig c;
  c.vocab_size = tokenizer.vocab_size();
  c.d_model = 8;
  c.heads = 2;
  c.pattern = "R";
  nn::LanguageModel model(c, init);
  std::vector<ChoiceItem> items = {{"ab", {" c", " d"}, 0}, {"ba", {" cz", " d"}, 1}};
  EXPECT_LINEA_ERROR(score_choices(model, tokenizer, items, 0, 0, kCPU, "f.jsonl"), "f.jsonl item 2", "ending 0",
                     "cannot encode 'z'");
  items[1] = {"", {" c", " d"}, 0};
  EXPECT_LINEA_ERROR(score_choices(model, tokenizer, items, 0, 0, kCPU, "f.jsonl"), "item 2", "context is empty");
  items[1] = {"a", {"", " d"}, 0};
  EXPECT_LINEA_ERROR(score_choices(model, tokenizer, items, 0, 0, kCPU, "f.jsonl"), "ending 0 encodes to no tokens");
}

}  // namespace
}  // namespace linea::train
