#pragma once
// A tokenizer turns text into ids in [0, vocab_size()) and back. Four kinds, one file each:
//
//   byte   byte_tokenizer.h   the 256 byte values; lossless for any bytes
//   char   char_tokenizer.h   Unicode code points seen in the training text, plus <unk>
//   word   word_tokenizer.h   whitespace-separated words with <eos> per line (WikiText)
//   bpe    bpe_tokenizer.h    byte-level byte-pair encoding trained on a text; lossless
//
// Saved files are text, so a person can read them:
//
//   linea-tokenizer 1 <kind>       magic, format version, kind
//   <body>                         kind-specific lines (see each kind's serialize())
//   checksum <16 hex digits>       FNV-1a 64 of every byte above this line
//
// The checksum turns a truncated or damaged file into a clear error rather than a tokenizer that
// quietly encodes differently.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/error.h"

namespace linea::train {

// A stretch of text that a tokenizer cannot represent, as bytes [offset, offset + size) of the
// text: a character (or an invalid UTF-8 byte) outside a char vocabulary, a word outside a word
// vocabulary. encode() turns each into <unk>.
struct Unencodable {
  size_t offset = 0;
  size_t size = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  // What encode(text) would turn into <unk>, in order; empty when the encoding is faithful. Byte
  // and BPE tokenizers represent any bytes, so this default suits them.
  virtual std::vector<Unencodable> unencodable(std::string_view text) const { return {}; }
  // Throws linea::Error for an id outside [0, vocab_size()).
  virtual std::string decode(std::span<const int64_t> ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::string name() const = 0;  // the kind: "byte", "char", "word" or "bpe"
  // The body of the saved file: everything that decides how text is encoded.
  virtual std::string serialize() const = 0;

  // The saved file's bytes, for embedding a tokenizer elsewhere (a checkpoint); parse_tokenizer
  // reads them back.
  std::string file_contents() const;
  // Writes file_contents() atomically (train/file_io.h).
  void save(const std::string& path) const;
  // A hash of serialize(): equal fingerprints mean the same encoding. Token caches record it.
  uint64_t fingerprint() const;

 protected:
  void check_id(int64_t id) const;
};

// Reads a file written by save(), whatever its kind.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);
// The same from bytes in memory; `origin` names them in error messages.
std::unique_ptr<Tokenizer> parse_tokenizer(std::string_view contents, const std::string& origin);

// Reads a file that must hold a tokenizer of kind T (T::kKind); another kind is an error.
template <class T>
std::unique_ptr<T> load_tokenizer_as(const std::string& path) {
  std::unique_ptr<Tokenizer> any = load_tokenizer(path);
  LINEA_CHECK(any->name() == T::kKind, "load_tokenizer", "'", path, "' holds a ", any->name(),
              " tokenizer, not a ", T::kKind, " tokenizer");
  return std::unique_ptr<T>(static_cast<T*>(any.release()));
}

// "byte", "char", "word", "bpe".
const std::vector<std::string>& tokenizer_kinds();
// A tokenizer of the given kind whose vocabulary comes from text (the training split); vocab_size
// is the target size for bpe and ignored by the other kinds.
std::unique_ptr<Tokenizer> build_tokenizer(const std::string& kind, std::string_view text, int64_t vocab_size);

}  // namespace linea::train
