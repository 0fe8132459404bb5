#include "train/bpe_tokenizer.h"

#include <limits>

namespace linea::train {

namespace {

constexpr size_t kMaxTableBytes = size_t{1} << 28;

enum class ByteClass { Space, Letter, Digit, Other };

ByteClass classify(char c) {
  const auto b = static_cast<unsigned char>(c);
  if (b == ' ' || b == '\n' || b == '\t' || b == '\r' || b == '\v' || b == '\f') return ByteClass::Space;
  if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b >= 0x80) return ByteClass::Letter;
  if (b >= '0' && b <= '9') return ByteClass::Digit;
  return ByteClass::Other;
}

}  // namespace

size_t piece_end(std::string_view text, size_t start) {
  const size_t n = text.size();
  size_t i = start;
  if (text[i] == ' ' && i + 1 < n && classify(text[i + 1]) != ByteClass::Space) ++i;
  const ByteClass cls = classify(text[i]);
  while (i < n && classify(text[i]) == cls) ++i;
  if (cls == ByteClass::Space && i < n && i - start > 1 && text[i - 1] == ' ') --i;
  return i;
}

std::vector<std::string_view> split_pieces(std::string_view text) {
  std::vector<std::string_view> pieces;
  for (size_t start = 0; start < text.size();) {
    const size_t end = piece_end(text, start);
    pieces.push_back(text.substr(start, end - start));
    start = end;
  }
  return pieces;
}

BpeTokenizer::BpeTokenizer(std::vector<Pair> merges) : merges_(std::move(merges)) {
  LINEA_CHECK(merges_.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max() - 256), "BpeTokenizer",
              "too many merges: ", merges_.size());
  bytes_.reserve(256 + merges_.size());
  for (int b = 0; b < 256; ++b) bytes_.emplace_back(1, static_cast<char>(b));
  size_t total_bytes = 256;
  for (size_t r = 0; r < merges_.size(); ++r) {
    const auto [left, right] = merges_[r];
    const int32_t id = 256 + static_cast<int32_t>(r);
    LINEA_CHECK(left >= 0 && left < id && right >= 0 && right < id, "BpeTokenizer", "merge ", r, " (", left, ", ",
                right, ") uses an id that does not exist before it");
    LINEA_CHECK(rank_.emplace(pair_key(left, right), static_cast<int32_t>(r)).second, "BpeTokenizer", "merge ", r,
                " (", left, ", ", right, ") repeats an earlier merge");
    // Merges of merges can double a token's length each time; a damaged or hostile file must not
    // make the byte table exhaust memory. Real vocabularies hold a few MB at most.
    total_bytes += bytes_[left].size() + bytes_[right].size();
    LINEA_CHECK(total_bytes <= kMaxTableBytes, "BpeTokenizer", "merge ", r, " makes the tokens' bytes exceed ",
                kMaxTableBytes, " in all");
    bytes_.push_back(bytes_[left] + bytes_[right]);
  }
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& symbols) const {
  symbols.clear();
  for (const char c : piece) symbols.push_back(static_cast<unsigned char>(c));
  // Pieces are short (a word), so a scan per merge beats maintaining a heap.
  while (symbols.size() > 1) {
    int32_t best_rank = std::numeric_limits<int32_t>::max();
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = rank_.find(pair_key(symbols[i], symbols[i + 1]));
      if (it != rank_.end() && it->second < best_rank) best_rank = it->second;
    }
    if (best_rank == std::numeric_limits<int32_t>::max()) break;
    const auto [left, right] = merges_[best_rank];
    size_t out = 0;
    for (size_t i = 0; i < symbols.size(); ++i) {
      if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
        symbols[out++] = 256 + best_rank;
        ++i;
      } else {
        symbols[out++] = symbols[i];
      }
    }
    symbols.resize(out);
  }
}

std::vector<int64_t> BpeTokenizer::encode(std::string_view text) const {
  // Natural text repeats its words, so each distinct piece is encoded once per call.
  std::unordered_map<std::string_view, std::vector<int32_t>> cache;
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3);
  for (size_t start = 0; start < text.size();) {
    const size_t end = piece_end(text, start);
    const std::string_view piece = text.substr(start, end - start);
    start = end;
    auto [it, inserted] = cache.try_emplace(piece);
    if (inserted) encode_piece(piece, it->second);
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  }
  return ids;
}

std::string BpeTokenizer::decode(std::span<const int64_t> ids) const {
  std::string text;
  for (const int64_t id : ids) text += bytes_of(id);
  return text;
}

std::string BpeTokenizer::serialize() const {
  std::string body = "merges " + std::to_string(merges_.size()) + "\n";
  for (const auto& [left, right] : merges_) body += std::to_string(left) + " " + std::to_string(right) + "\n";
  return body;
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::parse(TokenizerFileReader& reader) {
  const int64_t n = reader.count("merges", std::numeric_limits<int32_t>::max() - 257);
  std::vector<Pair> merges;
  for (int64_t r = 0; r < n; ++r) {
    const std::string_view line = reader.line("a merge");
    const size_t space = line.find(' ');
    if (space == std::string_view::npos)
      reader.error("expected '<left id> <right id>', found '", line.substr(0, 40), "'");
    const int64_t newest = 255 + r;  // the ids that exist before merge r
    merges.emplace_back(reader.integer(line.substr(0, space), 0, newest, "left id"),
                        reader.integer(line.substr(space + 1), 0, newest, "right id"));
  }
  return reader.make<BpeTokenizer>(std::move(merges));
}

}  // namespace linea::train
