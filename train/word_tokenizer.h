#pragma once
// Word-level, in the convention of WikiText and PyTorch's word_language_model example:
//
// - every line of text is its words (split on runs of ASCII whitespace) followed by <eos>; a
//   final line without '\n' counts as a line too;
// - the vocabulary is every word of the training text plus <eos>, numbered in order of first
//   appearance (so ids match the PyTorch example's); <unk> is an ordinary word there (WikiText
//   already contains it) and is appended at the end when the training text lacks it;
// - a word absent from the vocabulary encodes as <unk>;
// - decode joins words with single spaces and turns <eos> into '\n'. WikiText's leading space
//   on each line is whitespace, so decode(encode(line)) drops it: word-level is not lossless.
//
// On WikiText-2 this gives the published counts: 2,088,628 / 217,646 / 245,569 tokens for
// train / valid / test and a vocabulary of 33,278.
#include <unordered_map>

#include "train/tokenizer.h"
#include "train/tokenizer_file.h"

namespace linea::train {

class WordTokenizer : public Tokenizer {
 public:
  static constexpr const char* kKind = "word";
  static constexpr std::string_view kEos = "<eos>";
  static constexpr std::string_view kUnk = "<unk>";

  static WordTokenizer from_text(std::string_view text);
  // words: unique, non-empty, free of whitespace, containing <eos> and <unk>; id = position.
  explicit WordTokenizer(std::vector<std::string> words);

  std::vector<int64_t> encode(std::string_view text) const override;
  // Words outside the vocabulary (a literal "<unk>" is in it).
  std::vector<Unencodable> unencodable(std::string_view text) const override;
  std::string decode(std::span<const int64_t> ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(words_.size()); }
  std::string name() const override { return kKind; }
  // "words <n>" then one word per line (a word holds no whitespace, so no escaping is needed).
  std::string serialize() const override;

  int64_t eos_id() const { return eos_id_; }
  int64_t unk_id() const { return unk_id_; }
  const std::vector<std::string>& words() const { return words_; }

  static std::unique_ptr<WordTokenizer> parse(TokenizerFileReader& reader);
  static std::unique_ptr<WordTokenizer> load(const std::string& path) { return load_tokenizer_as<WordTokenizer>(path); }

 private:
  // Lets find() take a string_view into the text without building a std::string per word.
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::vector<std::string> words_;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> ids_;
  int64_t eos_id_ = -1, unk_id_ = -1;
};

bool is_ascii_space(char c);

// Calls on_word(word) for each word of text and on_eos() at the end of each line, in order.
template <class OnWord, class OnEos>
void for_each_word(std::string_view text, OnWord on_word, OnEos on_eos) {
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '\n') {
      on_eos();
      ++i;
    } else if (is_ascii_space(text[i])) {
      ++i;
    } else {
      const size_t start = i;
      while (i < text.size() && !is_ascii_space(text[i])) ++i;
      on_word(text.substr(start, i - start));
    }
  }
  if (!text.empty() && text.back() != '\n') on_eos();
}

}  // namespace linea::train
