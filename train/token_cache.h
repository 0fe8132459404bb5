#pragma once
// A corpus encoded once and kept on disk: <cache dir>/<corpus>.<tokenizer>.tokens. Encoding
// (and training a BPE tokenizer first) takes seconds to minutes; reading this back takes
// milliseconds. Binary, little-endian:
//
//   "LINEATOK"                         8-byte magic
//   u32 version                        kTokenCacheVersion
//   u32 n, n bytes                     tokenizer kind ("bpe")
//   u64 fingerprint, u64 vocab size    which tokenizer produced the ids (Tokenizer::fingerprint)
//   u64 bytes, i64 mtime_ns, u64 sum   the source it was encoded from (SourceStamp)
//   u64 train, valid, test counts
//   u32 ids                            train, then valid, then test
//   u64 checksum                       FNV-1a 64 of every byte before it
//
// A file that fails any check (size, magic, version, checksum, an id outside the vocabulary) is
// an Error from read_token_cache, never a crash; load_corpus then rebuilds it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "train/corpus_text.h"

namespace linea::train {

inline constexpr uint32_t kTokenCacheVersion = 1;

struct TokenCacheKey {
  std::string tokenizer_kind;
  uint64_t fingerprint = 0;
  int64_t vocab_size = 0;
  SourceStamp source;
  bool operator==(const TokenCacheKey&) const = default;
};

struct CachedTokens {
  TokenCacheKey key;
  std::vector<int64_t> train, valid, test;
};

std::string encode_token_cache(const CachedTokens& tokens);
// origin names the bytes in error messages.
CachedTokens decode_token_cache(std::string_view bytes, const std::string& origin);

void write_token_cache(const std::string& path, const CachedTokens& tokens);  // atomically
CachedTokens read_token_cache(const std::string& path);

}  // namespace linea::train
