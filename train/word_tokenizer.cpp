#include "train/word_tokenizer.h"

#include <algorithm>

namespace linea::train {

bool is_ascii_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

WordTokenizer WordTokenizer::from_text(std::string_view text) {
  std::vector<std::string> words;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> seen;
  const auto add = [&](std::string_view word) {
    if (seen.find(word) == seen.end()) {
      seen.emplace(word, 0);
      words.emplace_back(word);
    }
  };
  for_each_word(text, add, [&] { add(kEos); });
  add(kEos);  // an empty text still needs its specials
  add(kUnk);
  return WordTokenizer(std::move(words));
}

WordTokenizer::WordTokenizer(std::vector<std::string> words) : words_(std::move(words)) {
  ids_.reserve(words_.size());
  for (size_t i = 0; i < words_.size(); ++i) {
    const std::string& word = words_[i];
    LINEA_CHECK(!word.empty() && std::none_of(word.begin(), word.end(), is_ascii_space), "WordTokenizer", "word ", i,
                " ('", word, "') is empty or holds whitespace");
    LINEA_CHECK(ids_.emplace(word, static_cast<int64_t>(i)).second, "WordTokenizer", "word '", word,
                "' appears twice in the vocabulary");
  }
  const auto eos = ids_.find(kEos), unk = ids_.find(kUnk);
  LINEA_CHECK(eos != ids_.end() && unk != ids_.end(), "WordTokenizer", "the vocabulary lacks ", kEos, " or ", kUnk);
  eos_id_ = eos->second;
  unk_id_ = unk->second;
}

std::vector<int64_t> WordTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  for_each_word(
      text,
      [&](std::string_view word) {
        const auto it = ids_.find(word);
        ids.push_back(it == ids_.end() ? unk_id_ : it->second);
      },
      [&] { ids.push_back(eos_id_); });
  return ids;
}

std::vector<Unencodable> WordTokenizer::unencodable(std::string_view text) const {
  std::vector<Unencodable> unknown;
  for_each_word(
      text,
      [&](std::string_view word) {
        if (ids_.find(word) == ids_.end())
          unknown.push_back({static_cast<size_t>(word.data() - text.data()), word.size()});
      },
      [] {});
  return unknown;
}

std::string WordTokenizer::decode(std::span<const int64_t> ids) const {
  std::string text;
  bool line_start = true;
  for (const int64_t id : ids) {
    check_id(id);
    if (id == eos_id_) {
      text += '\n';
      line_start = true;
      continue;
    }
    if (!line_start) text += ' ';
    text += words_[id];
    line_start = false;
  }
  return text;
}

std::string WordTokenizer::serialize() const {
  std::string body = "words " + std::to_string(words_.size()) + "\n";
  for (const std::string& word : words_) body += word + "\n";
  return body;
}

std::unique_ptr<WordTokenizer> WordTokenizer::parse(TokenizerFileReader& reader) {
  const int64_t n = reader.count("words", INT32_MAX);
  std::vector<std::string> words;
  for (int64_t i = 0; i < n; ++i) words.emplace_back(reader.line("a word"));
  return reader.make<WordTokenizer>(std::move(words));
}

}  // namespace linea::train
