#include "train/byte_tokenizer.h"

namespace linea::train {

std::vector<int64_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int64_t> ids) const {
  std::string text(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    check_id(ids[i]);
    text[i] = static_cast<char>(ids[i]);
  }
  return text;
}

std::unique_ptr<ByteTokenizer> ByteTokenizer::parse(TokenizerFileReader&) { return std::make_unique<ByteTokenizer>(); }

}  // namespace linea::train
