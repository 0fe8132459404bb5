#include "train/tokenizer.h"

#include <cinttypes>
#include <cstdio>
#include <functional>
#include <map>

#include "train/bpe_tokenizer.h"
#include "train/byte_tokenizer.h"
#include "train/char_tokenizer.h"
#include "train/checksum.h"
#include "train/file_io.h"
#include "train/tokenizer_file.h"
#include "train/word_tokenizer.h"

namespace linea::train {

namespace {

constexpr std::string_view kMagic = "linea-tokenizer";
constexpr int64_t kFormatVersion = 1;
constexpr std::string_view kChecksumKey = "checksum ";

std::string hex64(uint64_t value) {
  char buffer[17];
  std::snprintf(buffer, sizeof buffer, "%016" PRIx64, value);
  return buffer;
}

using Parser = std::function<std::unique_ptr<Tokenizer>(TokenizerFileReader&)>;

const std::map<std::string, Parser, std::less<>>& parsers() {
  static const std::map<std::string, Parser, std::less<>> table = {
      {ByteTokenizer::kKind, [](TokenizerFileReader& r) { return ByteTokenizer::parse(r); }},
      {CharTokenizer::kKind, [](TokenizerFileReader& r) { return CharTokenizer::parse(r); }},
      {WordTokenizer::kKind, [](TokenizerFileReader& r) { return WordTokenizer::parse(r); }},
      {BpeTokenizer::kKind, [](TokenizerFileReader& r) { return BpeTokenizer::parse(r); }},
  };
  return table;
}

}  // namespace

std::string Tokenizer::file_contents() const {
  std::string file = std::string(kMagic) + " " + std::to_string(kFormatVersion) + " " + name() + "\n" + serialize();
  return file + std::string(kChecksumKey) + hex64(fnv1a64(file)) + "\n";
}

void Tokenizer::save(const std::string& path) const { write_file_atomically(path, file_contents()); }

uint64_t Tokenizer::fingerprint() const { return fnv1a64(name() + "\n" + serialize()); }

void Tokenizer::check_id(int64_t id) const {
  LINEA_CHECK(id >= 0 && id < vocab_size(), "decode", "token id ", id, " is outside the ", name(),
              " tokenizer's vocabulary [0, ", vocab_size(), ")");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  return parse_tokenizer(read_file(path, "tokenizer file"), path);
}

std::unique_ptr<Tokenizer> parse_tokenizer(std::string_view contents, const std::string& origin) {
  const auto fail_file = [&](const auto&... parts) { fail("load_tokenizer", "'", origin, "' ", parts...); };
  // Header first, so that a file of another kind is named as such rather than as corrupt.
  const size_t header_end = contents.find('\n');
  const std::string_view header = contents.substr(0, header_end);
  if (header.substr(0, kMagic.size() + 1) != std::string(kMagic) + " ")
    fail_file("is not a linea tokenizer file (its first line should start with '", kMagic, "')");

  const size_t last_line = contents.size() >= 2 ? contents.rfind('\n', contents.size() - 2) : std::string_view::npos;
  const std::string_view checksum_line =
      last_line == std::string_view::npos ? std::string_view() : contents.substr(last_line + 1);
  if (header_end == std::string_view::npos || contents.back() != '\n' || last_line < header_end ||
      checksum_line.substr(0, kChecksumKey.size()) != kChecksumKey)
    fail_file("is truncated or corrupt: it lacks its final checksum line");
  const std::string_view covered = contents.substr(0, last_line + 1);
  if (checksum_line != std::string(kChecksumKey) + hex64(fnv1a64(covered)) + "\n")
    fail_file("is corrupt: its checksum does not match its contents");

  TokenizerFileReader header_reader(contents.substr(0, header_end + 1), origin, 1);
  const std::string_view fields = header_reader.line("the header").substr(kMagic.size() + 1);
  const size_t space = fields.find(' ');
  const int64_t version = header_reader.integer(fields.substr(0, space), 0, INT64_MAX, "format version");
  if (version != kFormatVersion)
    fail_file("has format version ", version, "; this build of linea reads version ", kFormatVersion);
  const std::string_view kind = space == std::string_view::npos ? std::string_view() : fields.substr(space + 1);
  const auto parser = parsers().find(kind);
  if (parser == parsers().end()) fail_file("names an unknown tokenizer kind '", kind.substr(0, 40), "'");

  TokenizerFileReader body(covered.substr(header_end + 1), origin, 2);
  std::unique_ptr<Tokenizer> tokenizer = parser->second(body);
  body.finish();
  return tokenizer;
}

const std::vector<std::string>& tokenizer_kinds() {
  static const std::vector<std::string> kinds = {ByteTokenizer::kKind, CharTokenizer::kKind, WordTokenizer::kKind,
                                                 BpeTokenizer::kKind};
  return kinds;
}

std::unique_ptr<Tokenizer> build_tokenizer(const std::string& kind, std::string_view text, int64_t vocab_size) {
  if (kind == ByteTokenizer::kKind) return std::make_unique<ByteTokenizer>();
  if (kind == CharTokenizer::kKind) return std::make_unique<CharTokenizer>(CharTokenizer::from_text(text));
  if (kind == WordTokenizer::kKind) return std::make_unique<WordTokenizer>(WordTokenizer::from_text(text));
  if (kind == BpeTokenizer::kKind) return std::make_unique<BpeTokenizer>(train_bpe(text, vocab_size));
  fail("build_tokenizer", "unknown tokenizer kind '", kind, "' (expected byte, char, word or bpe)");
}

}  // namespace linea::train
