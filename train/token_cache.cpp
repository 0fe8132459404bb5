#include "train/token_cache.h"

#include <algorithm>
#include <array>

#include "tensor/error.h"
#include "train/checksum.h"
#include "train/file_io.h"

namespace linea::train {

namespace {

constexpr std::string_view kMagic = "LINEATOK";
constexpr uint32_t kMaxKindLength = 64;

template <class T>
void put(std::string& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out += static_cast<char>(static_cast<uint64_t>(value) >> (8 * i));
}

// Reads fields front to back; running past the end is an error, never an out-of-bounds read.
class Cursor {
 public:
  Cursor(std::string_view bytes, const std::string& origin) : bytes_(bytes), origin_(origin) {}

  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    uint64_t value = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
    pos_ += sizeof(T);
    return static_cast<T>(value);
  }
  std::string_view take(size_t n, const char* what) {
    need(n, what);
    pos_ += n;
    return bytes_.substr(pos_ - n, n);
  }
  size_t remaining() const { return bytes_.size() - pos_; }

  template <class... Parts>
  [[noreturn]] void error(const Parts&... parts) const {
    fail("token_cache", "'", origin_, "' ", parts...);
  }

 private:
  void need(size_t n, const char* what) const {
    if (n > remaining()) error("is truncated (it ends inside the ", what, ")");
  }
  std::string_view bytes_;
  const std::string& origin_;
  size_t pos_ = 0;
};

// CachedTokens or const CachedTokens.
template <class Tokens>
auto splits_of(Tokens& tokens) {
  return std::array{&tokens.train, &tokens.valid, &tokens.test};
}

}  // namespace

std::string encode_token_cache(const CachedTokens& tokens) {
  const TokenCacheKey& key = tokens.key;
  LINEA_CHECK(key.tokenizer_kind.size() <= kMaxKindLength, "token_cache", "tokenizer kind too long");
  LINEA_CHECK(key.vocab_size > 0 && key.vocab_size <= (int64_t{1} << 32), "token_cache", "vocabulary size ",
              key.vocab_size, " does not fit the cache's 32-bit ids");
  std::string out(kMagic);
  put<uint32_t>(out, kTokenCacheVersion);
  put<uint32_t>(out, static_cast<uint32_t>(key.tokenizer_kind.size()));
  out += key.tokenizer_kind;
  put<uint64_t>(out, key.fingerprint);
  put<uint64_t>(out, static_cast<uint64_t>(key.vocab_size));
  put<uint64_t>(out, key.source.bytes);
  put<int64_t>(out, key.source.mtime_ns);
  put<uint64_t>(out, key.source.checksum);
  const auto splits = splits_of(tokens);
  for (const auto* split : splits) put<uint64_t>(out, split->size());
  out.reserve(out.size() + 4 * (tokens.train.size() + tokens.valid.size() + tokens.test.size()) + 8);
  for (const auto* split : splits)
    for (const int64_t id : *split) {
      LINEA_CHECK(id >= 0 && id < key.vocab_size, "token_cache", "id ", id, " is outside the vocabulary");
      put<uint32_t>(out, static_cast<uint32_t>(id));
    }
  put<uint64_t>(out, fnv1a64(out));
  return out;
}

CachedTokens decode_token_cache(std::string_view bytes, const std::string& origin) {
  Cursor cursor(bytes, origin);
  // Checked before anything else: a file of another kind should say so, not "checksum mismatch".
  if (cursor.take(std::min(bytes.size(), kMagic.size()), "magic") != kMagic) cursor.error("is not a linea token cache");
  if (bytes.size() < kMagic.size() + 8) cursor.error("is truncated");
  const std::string_view covered = bytes.substr(0, bytes.size() - 8);
  Cursor trailer(bytes.substr(covered.size()), origin);
  if (trailer.get<uint64_t>("checksum") != fnv1a64(covered))
    cursor.error("is corrupt or truncated: its checksum does not match its contents");

  Cursor in(covered.substr(kMagic.size()), origin);
  const auto version = in.get<uint32_t>("version");
  if (version != kTokenCacheVersion)
    in.error("has version ", version, "; this build writes version ", kTokenCacheVersion);
  CachedTokens tokens;
  TokenCacheKey& key = tokens.key;
  const auto kind_length = in.get<uint32_t>("kind length");
  if (kind_length > kMaxKindLength) in.error("has a kind name ", kind_length, " bytes long");
  key.tokenizer_kind = std::string(in.take(kind_length, "tokenizer kind"));
  key.fingerprint = in.get<uint64_t>("fingerprint");
  key.vocab_size = static_cast<int64_t>(in.get<uint64_t>("vocabulary size"));
  key.source.bytes = in.get<uint64_t>("source size");
  key.source.mtime_ns = in.get<int64_t>("source mtime");
  key.source.checksum = in.get<uint64_t>("source checksum");
  if (key.vocab_size <= 0 || key.vocab_size > (int64_t{1} << 32)) in.error("has a vocabulary size of ", key.vocab_size);
  uint64_t counts[3], total = 0;
  for (uint64_t& count : counts) {
    count = in.get<uint64_t>("token counts");
    if (count > in.remaining() / 4) in.error("declares more tokens than it holds");  // before any allocation
    total += count;
  }
  if (total * 4 != in.remaining()) in.error("declares ", total, " tokens but holds ", in.remaining(), " bytes of them");
  const auto splits = splits_of(tokens);
  for (int s = 0; s < 3; ++s) {
    splits[s]->resize(counts[s]);
    for (int64_t& id : *splits[s]) {
      id = in.get<uint32_t>("tokens");
      if (id >= key.vocab_size) in.error("holds token id ", id, " outside its vocabulary of ", key.vocab_size);
    }
  }
  return tokens;
}

void write_token_cache(const std::string& path, const CachedTokens& tokens) {
  write_file_atomically(path, encode_token_cache(tokens));
}

CachedTokens read_token_cache(const std::string& path) {
  return decode_token_cache(read_file(path, "token cache"), path);
}

}  // namespace linea::train
