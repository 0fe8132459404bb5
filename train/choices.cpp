#include "train/choices.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "autograd/ops.h"
#include "nn/json.h"
#include "tensor/error.h"
#include "train/file_io.h"

namespace linea::train {

namespace {

// splitmix64: a small, fully specified generator, so a seed gives the same shots on every
// platform (std's distributions are not specified bit for bit).
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

ChoiceItem parse_item(const json::Value& v, const std::string& where) {
  LINEA_CHECK(v.is_object(), "choices", where, ": expected an object {\"context\", \"endings\", \"label\"}, got ",
              v.type_name());
  for (const auto& [key, value] : v.items())
    LINEA_CHECK(key == "context" || key == "endings" || key == "label", "choices", where, ": unknown key '", key,
                "' (known: context, endings, label)");
  ChoiceItem item;
  item.context = json::get<std::string>(v, "context", where);
  const json::Value& endings = json::at(v, "endings", where);
  LINEA_CHECK(endings.is_array() && endings.size() >= 2, "choices", where,
              ": \"endings\" must be an array of at least two strings");
  for (size_t i = 0; i < endings.size(); ++i)
    item.endings.push_back(json::as<std::string>(endings[i], where + " ending " + std::to_string(i)));
  item.label = json::get<int64_t>(v, "label", where);
  LINEA_CHECK(item.label >= 0 && item.label < static_cast<int64_t>(item.endings.size()), "choices", where,
              ": label ", item.label, " is not an index of its ", item.endings.size(), " endings");
  return item;
}

// The token ids of `text`, refusing what the tokenizer would turn into <unk>.
std::vector<int64_t> encode_exactly(const Tokenizer& tokenizer, const std::string& text, const std::string& what) {
  const auto unknown = tokenizer.unencodable(text);
  LINEA_CHECK(unknown.empty(), "choices", what, ": the checkpoint's ", tokenizer.name(), " tokenizer cannot encode '",
              text.substr(unknown.empty() ? 0 : unknown[0].offset, unknown.empty() ? 0 : unknown[0].size), "' at byte ",
              unknown.empty() ? 0 : unknown[0].offset, " (it would score <unk> instead)");
  return tokenizer.encode(text);
}

// log p(ending | prompt) under the model: one forward over prompt + ending (all but the last).
double log_likelihood(nn::LanguageModel& model, const std::vector<int64_t>& prompt, const std::vector<int64_t>& ending,
                      Device device) {
  std::vector<int64_t> ids = prompt;
  ids.insert(ids.end(), ending.begin(), ending.end());
  const int64_t n = static_cast<int64_t>(ids.size()), p = static_cast<int64_t>(prompt.size());
  const Tensor inputs = to(from_vector(std::vector<int64_t>(ids.begin(), ids.end() - 1), {1, n - 1}), device);
  const Tensor targets = to(from_vector(std::vector<int64_t>(ids.begin() + p, ids.end()), {1, n - p, 1}), device);
  // The logits at positions p-1 .. n-2 predict the ending's tokens.
  const Tensor logits = narrow(model.forward(inputs), 1, p - 1, n - p);  // (1, n - p, V)
  return sum(gather(log_softmax(to(logits, kFloat64), -1), 2, targets)).item();
}

int64_t argmax(const std::vector<double>& values) {
  return static_cast<int64_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

}  // namespace

std::vector<ChoiceItem> read_choice_items(const std::string& path) {
  const std::string text = read_file(path, "multiple-choice items");
  std::vector<ChoiceItem> items;
  int64_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + " line " + std::to_string(line_number);
    items.push_back(parse_item(json::parse(line, where), where));
  }
  LINEA_CHECK(!items.empty(), "choices", path, " holds no items (one JSON object per line: {\"context\": ..., ",
              "\"endings\": [...], \"label\": ...})");
  return items;
}

std::string few_shot_prompt(const std::vector<ChoiceItem>& items, size_t index, int64_t shots, uint64_t seed) {
  LINEA_CHECK(index < items.size(), "choices", "item ", index, " of ", items.size());
  LINEA_CHECK(shots >= 0 && static_cast<size_t>(shots) < items.size(), "choices", shots,
              "-shot prompts need more than ", shots, " items, the file has ", items.size());
  // A partial Fisher-Yates shuffle of the other items, from a stream of its own per item.
  std::vector<size_t> others(items.size());
  std::iota(others.begin(), others.end(), size_t{0});
  others.erase(others.begin() + static_cast<std::ptrdiff_t>(index));
  uint64_t state = seed ^ (0xd1b54a32d192ed03ull * (index + 1));
  std::string prompt;
  for (int64_t s = 0; s < shots; ++s) {
    const size_t pick = s + next_random(state) % (others.size() - s);
    std::swap(others[s], others[pick]);
    const ChoiceItem& shot = items[others[s]];
    prompt += shot.context + shot.endings[shot.label] + "\n\n";
  }
  return prompt + items[index].context;
}

ChoiceResult score_choices(nn::LanguageModel& model, const Tokenizer& tokenizer, const std::vector<ChoiceItem>& items,
                           int64_t shots, uint64_t seed, Device device, const std::string& items_origin) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  ChoiceResult result;
  int64_t right = 0, right_norm = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string what = items_origin + " item " + std::to_string(i + 1);
    const std::vector<int64_t> prompt = encode_exactly(tokenizer, few_shot_prompt(items, i, shots, seed), what);
    LINEA_CHECK(!prompt.empty(), "choices", what, ": the context is empty (with no shots before it, an ending's ",
                "first token would have nothing to follow)");
    ChoiceScore score;
    std::vector<double> per_byte;
    for (size_t e = 0; e < items[i].endings.size(); ++e) {
      const std::string& ending = items[i].endings[e];
      const std::vector<int64_t> ids = encode_exactly(tokenizer, ending, what + " ending " + std::to_string(e));
      LINEA_CHECK(!ids.empty(), "choices", what, ": ending ", e, " encodes to no tokens");
      const double ll = log_likelihood(model, prompt, ids, device);
      LINEA_CHECK(std::isfinite(ll), "choices", what, ": ending ", e, " scored ", ll, " (the model's logits are not finite)");
      score.log_likelihoods.push_back(ll);
      per_byte.push_back(ll / static_cast<double>(ending.size()));
    }
    score.predicted = argmax(score.log_likelihoods);
    score.predicted_norm = argmax(per_byte);
    right += score.predicted == items[i].label;
    right_norm += score.predicted_norm == items[i].label;
    result.items.push_back(score);
  }
  result.acc = static_cast<double>(right) / static_cast<double>(items.size());
  result.acc_norm = static_cast<double>(right_norm) / static_cast<double>(items.size());
  model.train(was_training);
  return result;
}

}  // namespace linea::train
