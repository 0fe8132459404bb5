#include "train/corpus.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "train/bpe_tokenizer.h"
#include "train/char_tokenizer.h"
#include "train/token_cache.h"

namespace linea::train {

namespace fs = std::filesystem;

namespace {

std::string cache_tag(const std::string& kind, int64_t vocab_size) {
  return kind == BpeTokenizer::kKind ? kind + std::to_string(vocab_size) : kind;
}

TokenCacheKey key_of(const Tokenizer& tokenizer, const SourceStamp& source) {
  return {tokenizer.name(), tokenizer.fingerprint(), tokenizer.vocab_size(), source};
}

// Why a cache entry cannot be used, or "" when it can.
std::string staleness(const TokenCacheKey& cached, const TokenCacheKey& wanted) {
  if (cached.source.bytes != wanted.source.bytes || cached.source.checksum != wanted.source.checksum)
    return "the source text changed";
  if (cached.source.mtime_ns != wanted.source.mtime_ns) return "the source files were modified";
  if (!(cached == wanted)) return "the tokenizer changed";
  return "";
}

Corpus make_corpus(const std::string& name, std::shared_ptr<const Tokenizer> tokenizer, CachedTokens tokens) {
  return {name, std::move(tokenizer), std::move(tokens.train), std::move(tokens.valid), std::move(tokens.test)};
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

using Log = std::function<void(const std::string&)>;

struct CacheFiles {
  std::string tokens, tokenizer;
};

// The corpus the cache holds, if it is intact and still matches the source text and the
// tokenizer; otherwise nullopt, after logging why it cannot be used.
std::optional<Corpus> read_cached(const CacheFiles& files, const CorpusText& text,
                                  std::shared_ptr<const Tokenizer> tokenizer, const Log& log) {
  std::error_code ec;
  if (!fs::exists(files.tokens, ec)) return std::nullopt;
  try {
    CachedTokens cached = read_token_cache(files.tokens);
    if (!tokenizer) tokenizer = load_tokenizer(files.tokenizer);
    const std::string why = staleness(cached.key, key_of(*tokenizer, text.stamp));
    if (why.empty()) {
      log("using the token cache '" + files.tokens + "'");
      return make_corpus(text.name, std::move(tokenizer), std::move(cached));
    }
    log("token cache '" + files.tokens + "' is stale (" + why + "); rebuilding it");
  } catch (const Error& e) {
    log(std::string("token cache unusable, rebuilding it: ") + e.what());
  }
  return std::nullopt;
}

// The cache is a convenience: failing to write it (a read-only or full disk) must not stop a run.
void write_cache(const CacheFiles& files, const Tokenizer& tokenizer, const CachedTokens& tokens, const Log& log) {
  try {
    // The tokenizer goes first: a crash between the two writes leaves a token file whose
    // fingerprint no longer matches, which the next run rebuilds.
    tokenizer.save(files.tokenizer);
    write_token_cache(files.tokens, tokens);
  } catch (const Error& e) {
    log(std::string("could not write the token cache (continuing without it): ") + e.what());
  }
}

std::shared_ptr<const Tokenizer> build_logged(const std::string& kind, const CorpusText& text, int64_t vocab_size,
                                              const Log& log) {
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const Tokenizer> tokenizer = build_tokenizer(kind, text.train, vocab_size);
  if (kind == BpeTokenizer::kKind) {  // the only kind slow enough to mention
    std::ostringstream message;
    message << "trained a " << tokenizer->vocab_size() << "-token bpe tokenizer on " << text.train.size()
            << " bytes of " << text.name << " in " << seconds_since(start) << " s";
    log(message.str());
  }
  return tokenizer;
}

}  // namespace

std::string token_cache_path(const std::string& cache_dir, const std::string& corpus_name, const std::string& tag) {
  return (fs::path(cache_dir) / (corpus_name + "." + tag + ".tokens")).string();
}

std::string tokenizer_cache_path(const std::string& cache_dir, const std::string& corpus_name, const std::string& tag) {
  return (fs::path(cache_dir) / (corpus_name + "." + tag + ".tokenizer")).string();
}

std::string default_cache_dir() {
  if (const char* dir = std::getenv("LINEA_CACHE_DIR"); dir && *dir) return dir;
  if (const char* dir = std::getenv("XDG_CACHE_HOME"); dir && *dir) return (fs::path(dir) / "linea").string();
  if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache" / "linea").string();
  return "";
}

Corpus load_corpus(const CorpusOptions& options) {
  const Log log = options.log ? options.log
                              : [](const std::string& message) { std::cerr << "linea: " << message << "\n"; };
  const std::shared_ptr<const Tokenizer>& given = options.given_tokenizer;
  const std::string kind = given ? given->name() : options.tokenizer;
  const auto& kinds = tokenizer_kinds();
  LINEA_CHECK(std::find(kinds.begin(), kinds.end(), kind) != kinds.end(), "corpus", "unknown tokenizer '", kind,
              "' (expected byte, char, word or bpe)");
  const CorpusText text = read_corpus_text(options.data, options.fortunes_dir, kind == CharTokenizer::kKind);

  const bool use_cache = !options.cache_dir.empty();
  const std::string tag = cache_tag(kind, given ? given->vocab_size() : options.vocab_size);
  const CacheFiles files{token_cache_path(options.cache_dir, text.name, tag),
                         tokenizer_cache_path(options.cache_dir, text.name, tag)};
  if (use_cache)
    if (std::optional<Corpus> cached = read_cached(files, text, given, log)) return std::move(*cached);

  const std::shared_ptr<const Tokenizer> tokenizer = given ? given : build_logged(kind, text, options.vocab_size, log);
  CachedTokens tokens{key_of(*tokenizer, text.stamp), tokenizer->encode(text.train), tokenizer->encode(text.valid),
                      tokenizer->encode(text.test)};
  if (use_cache) write_cache(files, *tokenizer, tokens, log);
  return make_corpus(text.name, tokenizer, std::move(tokens));
}

}  // namespace linea::train
