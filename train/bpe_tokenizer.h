#pragma once
// Byte-level byte-pair encoding (Sennrich et al. 2016, on bytes as in GPT-2). Ids 0..255 are the
// bytes; merge r makes id 256 + r from a pair of older ids. Every id stands for a fixed byte
// string, so decode is lossless for any input bytes.
//
// Text is first cut into pieces (split_pieces) and merges never cross a piece boundary, so a
// token never straddles two words: "the" and " the" are learned as words, not "e t".
//
// Encoding a piece applies merges by rank: repeatedly merge, everywhere in the piece, the adjacent
// pair with the lowest rank, until no adjacent pair has one. That replays training exactly on the
// training text.
#include <unordered_map>
#include <utility>

#include "train/tokenizer.h"
#include "train/tokenizer_file.h"

namespace linea::train {

class BpeTokenizer : public Tokenizer {
 public:
  static constexpr const char* kKind = "bpe";
  using Pair = std::pair<int32_t, int32_t>;

  // merges[r] is the pair of ids that becomes id 256 + r; both must be < 256 + r.
  explicit BpeTokenizer(std::vector<Pair> merges);

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int64_t> ids) const override;
  int64_t vocab_size() const override { return 256 + static_cast<int64_t>(merges_.size()); }
  std::string name() const override { return kKind; }
  // "merges <n>" then one "<left id> <right id>" line per merge, in rank order.
  std::string serialize() const override;

  const std::vector<Pair>& merges() const { return merges_; }
  const std::string& bytes_of(int64_t id) const {
    check_id(id);
    return bytes_[id];
  }

  static std::unique_ptr<BpeTokenizer> parse(TokenizerFileReader& reader);
  static std::unique_ptr<BpeTokenizer> load(const std::string& path) { return load_tokenizer_as<BpeTokenizer>(path); }

 private:
  void encode_piece(std::string_view piece, std::vector<int32_t>& symbols) const;

  std::vector<Pair> merges_;
  std::unordered_map<uint64_t, int32_t> rank_;  // pair_key(pair) -> merge rank
  std::vector<std::string> bytes_;              // id -> the bytes it stands for
};

// Learns merges from text until the vocabulary holds vocab_size ids (>= 256), or until no
// adjacent pair occurs twice (then the vocabulary is smaller: merging a pair seen once only
// memorises). The most frequent pair wins; ties go to the smallest (left, right) ids, so the
// result depends on the text alone.
BpeTokenizer train_bpe(std::string_view text, int64_t vocab_size);

// The pre-split rule. Bytes fall into four classes: space (ASCII whitespace), letter (ASCII
// letters and every byte >= 0x80, so UTF-8 words stay whole), digit, and other (punctuation).
// A piece is a run of one class, where a run of letters, digits or punctuation takes a single
// space in front of it (" word"), and a run of whitespace leaves its last space to the word
// after it. Concatenating the pieces gives back text.
std::vector<std::string_view> split_pieces(std::string_view text);
// Where the piece starting at text[start] ends; split_pieces without the vector.
size_t piece_end(std::string_view text, size_t start);

inline uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace linea::train
