#include "train/char_tokenizer.h"

#include <algorithm>
#include <set>

#include "train/utf8.h"

namespace linea::train {

CharTokenizer CharTokenizer::from_text(std::string_view text) {
  std::set<char32_t> seen;
  for (size_t pos = 0; pos < text.size();) {
    const int32_t c = utf8::next(text, pos);
    if (c != utf8::kInvalid) seen.insert(static_cast<char32_t>(c));
  }
  return CharTokenizer(std::vector<char32_t>(seen.begin(), seen.end()));
}

CharTokenizer::CharTokenizer(std::vector<char32_t> code_points) : chars_(std::move(code_points)) {
  for (size_t i = 0; i < chars_.size(); ++i) {
    LINEA_CHECK(utf8::is_code_point(chars_[i]), "CharTokenizer", static_cast<uint32_t>(chars_[i]),
                " is not a Unicode code point");
    LINEA_CHECK(i == 0 || chars_[i - 1] < chars_[i], "CharTokenizer", "code points must be strictly increasing");
    ids_.emplace(chars_[i], static_cast<int64_t>(i) + 1);
  }
}

std::vector<int64_t> CharTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const int32_t c = utf8::next(text, pos);
    const auto it = c == utf8::kInvalid ? ids_.end() : ids_.find(static_cast<char32_t>(c));
    ids.push_back(it == ids_.end() ? kUnkId : it->second);
  }
  return ids;
}

std::vector<Unencodable> CharTokenizer::unencodable(std::string_view text) const {
  std::vector<Unencodable> unknown;
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    const int32_t c = utf8::next(text, pos);
    if (c == utf8::kInvalid || !ids_.contains(static_cast<char32_t>(c))) unknown.push_back({start, pos - start});
  }
  return unknown;
}

std::string CharTokenizer::decode(std::span<const int64_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (const int64_t id : ids) {
    check_id(id);
    utf8::append(text, id == kUnkId ? utf8::kReplacement : chars_[id - 1]);
  }
  return text;
}

std::string CharTokenizer::serialize() const {
  std::string body = "chars " + std::to_string(chars_.size()) + "\n";
  for (const char32_t c : chars_) body += std::to_string(static_cast<uint32_t>(c)) + "\n";
  return body;
}

std::unique_ptr<CharTokenizer> CharTokenizer::parse(TokenizerFileReader& reader) {
  const int64_t n = reader.count("chars", 0x110000);
  std::vector<char32_t> chars;
  for (int64_t i = 0; i < n; ++i)
    chars.push_back(static_cast<char32_t>(reader.integer(reader.line("a code point"), 0, 0x10FFFF, "code point")));
  return reader.make<CharTokenizer>(std::move(chars));
}

}  // namespace linea::train
