#pragma once
// Byte-level: id = byte value. Nothing to learn and nothing unknown, so any bytes survive
// encode/decode unchanged; the price is the longest sequences of all the kinds.
#include "train/tokenizer.h"
#include "train/tokenizer_file.h"

namespace linea::train {

class ByteTokenizer : public Tokenizer {
 public:
  static constexpr const char* kKind = "byte";

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int64_t> ids) const override;
  int64_t vocab_size() const override { return 256; }
  std::string name() const override { return kKind; }
  std::string serialize() const override { return ""; }  // the body is empty: there is no vocabulary to store

  static std::unique_ptr<ByteTokenizer> parse(TokenizerFileReader& reader);
  static std::unique_ptr<ByteTokenizer> load(const std::string& path) { return load_tokenizer_as<ByteTokenizer>(path); }
};

}  // namespace linea::train
