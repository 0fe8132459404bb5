#pragma once
// Character-level: one id per Unicode code point seen in the training text, in code point order,
// after id 0 = <unk>.
//
// Encoding decodes UTF-8 strictly (train/utf8.h). A character outside the vocabulary maps to
// <unk>, and so does each byte of an invalid UTF-8 sequence, one <unk> per byte: encoding never
// fails and never crashes, but it is lossless only for valid UTF-8 whose characters were all seen
// in training. <unk> decodes to U+FFFD, the Unicode replacement character, as text viewers show
// undecodable bytes. (The corpus loaders refuse non-UTF-8 text outright for this tokenizer, so a
// training run never learns from such <unk>s.)
#include <unordered_map>

#include "train/tokenizer.h"
#include "train/tokenizer_file.h"

namespace linea::train {

class CharTokenizer : public Tokenizer {
 public:
  static constexpr const char* kKind = "char";
  static constexpr int64_t kUnkId = 0;

  // Every valid code point in text; bytes of invalid sequences are skipped.
  static CharTokenizer from_text(std::string_view text);
  // code_points: valid and strictly increasing.
  explicit CharTokenizer(std::vector<char32_t> code_points);

  std::vector<int64_t> encode(std::string_view text) const override;
  // Characters outside the vocabulary, and each byte of an invalid UTF-8 sequence.
  std::vector<Unencodable> unencodable(std::string_view text) const override;
  std::string decode(std::span<const int64_t> ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(chars_.size()) + 1; }
  std::string name() const override { return kKind; }
  // "chars <n>" then one decimal code point per line: numbers, so newlines and other control
  // characters in the vocabulary need no escaping.
  std::string serialize() const override;

  const std::vector<char32_t>& chars() const { return chars_; }  // id i + 1 is chars()[i]

  static std::unique_ptr<CharTokenizer> parse(TokenizerFileReader& reader);
  static std::unique_ptr<CharTokenizer> load(const std::string& path) { return load_tokenizer_as<CharTokenizer>(path); }

 private:
  std::vector<char32_t> chars_;
  std::unordered_map<char32_t, int64_t> ids_;
};

}  // namespace linea::train
