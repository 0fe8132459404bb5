// The encoded-corpus cache: reused while valid; rebuilt, with a message, when the source or the
// tokenizer changed or the file is damaged; and the rebuilt corpus equals a fresh one.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "tests/test_util.h"
#include "tests/train/data_test_util.h"
#include "tests/train/temp_dir.h"
#include "train/corpus.h"
#include "train/file_io.h"
#include "train/token_cache.h"

namespace linea::train {
namespace {

namespace fs = std::filesystem;
using linea::testing::TempDir;
using linea::testing::write_bytes;

// A corpus file and options that cache under the same temporary directory, with the log captured.
struct CacheFixture {
  TempDir dir;
  std::vector<std::string> messages;
  CorpusOptions options;

  explicit CacheFixture(const std::string& tokenizer = "bpe") {
    std::mt19937_64 rng(6);
    write_bytes(source(), linea::testing::zipf_text(rng, 3000));
    options.data = source();
    options.tokenizer = tokenizer;
    options.vocab_size = 300;
    options.cache_dir = dir / "cache";
    options.log = [this](const std::string& message) { messages.push_back(message); };
  }
  std::string source() const { return dir / "text.txt"; }
  std::string tokens_path() const {
    const std::string tag = options.tokenizer == "bpe" ? "bpe" + std::to_string(options.vocab_size) : options.tokenizer;
    return token_cache_path(options.cache_dir, read_text_file(source(), false).name, tag);
  }
  // Loads, returning the corpus and the one message the load logged ("" when silent).
  Corpus load(std::string* message = nullptr) {
    messages.clear();
    Corpus corpus = load_corpus(options);
    if (message) *message = messages.empty() ? "" : messages.back();
    return corpus;
  }
};

void expect_same_corpus(const Corpus& a, const Corpus& b) {
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.valid, b.valid);
  EXPECT_EQ(a.test, b.test);
  EXPECT_EQ(a.tokenizer->fingerprint(), b.tokenizer->fingerprint());
}

TEST(TokenCache, EncodeDecodeRoundTrip) {
  CachedTokens tokens{{"bpe", 0x1234, 300, {10, -5, 77}}, {1, 2, 299}, {0}, {5, 6}};
  const std::string bytes = encode_token_cache(tokens);
  const CachedTokens back = decode_token_cache(bytes, "memory");
  EXPECT_EQ(back.key, tokens.key);
  EXPECT_EQ(back.train, tokens.train);
  EXPECT_EQ(back.valid, tokens.valid);
  EXPECT_EQ(back.test, tokens.test);
  tokens.train.push_back(300);
  EXPECT_LINEA_ERROR(encode_token_cache(tokens), "outside the vocabulary");
}

TEST(TokenCache, IsWrittenThenReused) {
  CacheFixture f;
  std::string message;
  const Corpus built = f.load(&message);
  EXPECT_NE(message.find("trained a"), std::string::npos) << message;
  ASSERT_TRUE(fs::exists(f.tokens_path()));
  const auto written = fs::last_write_time(f.tokens_path());
  const Corpus reused = f.load(&message);
  EXPECT_NE(message.find("using the token cache"), std::string::npos) << message;
  EXPECT_EQ(fs::last_write_time(f.tokens_path()), written);
  expect_same_corpus(built, reused);
  EXPECT_EQ(built.name, reused.name);
}

TEST(TokenCache, ChangedSourceIsDetected) {
  CacheFixture f;
  const Corpus before = f.load();
  std::string message;
  write_bytes(f.source(), read_file(f.source(), "test") + "a new line of text\n");
  const Corpus after = f.load(&message);
  EXPECT_NE(message.find("trained a"), std::string::npos);
  EXPECT_NE(f.messages.front().find("stale (the source text changed)"), std::string::npos) << f.messages.front();
  expect_same_corpus(after, f.load());  // and the rebuilt cache is reused

  // A newer modification time alone also counts: the rule is "any change rebuilds".
  fs::last_write_time(f.source(), fs::last_write_time(f.source()) + std::chrono::seconds(5));
  const Corpus touched = f.load();
  EXPECT_NE(f.messages.front().find("stale (the source files were modified)"), std::string::npos) << f.messages.front();
  expect_same_corpus(after, touched);
}

TEST(TokenCache, ChangedTokenizerIsDetected) {
  CacheFixture f("char");
  const Corpus first = f.load();
  f.options.given_tokenizer = build_tokenizer("char", "only a few letters", 0);
  const Corpus second = f.load();
  ASSERT_FALSE(f.messages.empty());
  EXPECT_NE(f.messages.front().find("stale (the tokenizer changed)"), std::string::npos) << f.messages.front();
  EXPECT_EQ(second.tokenizer->fingerprint(), f.options.given_tokenizer->fingerprint());
  EXPECT_EQ(second.train, f.options.given_tokenizer->encode(read_text_file(f.source(), false).train));
}

TEST(TokenCache, DamageIsRebuiltNeverTrusted) {
  CacheFixture f;
  const Corpus original = f.load();
  const std::string good = read_file(f.tokens_path(), "test");
  const auto tokenizer_path = fs::path(f.tokens_path()).replace_extension(".tokenizer").string();
  const std::string good_tokenizer = read_file(tokenizer_path, "test");
  struct Damage {
    const char* what;
    std::string tokens, tokenizer;
  };
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x10;
  const std::vector<Damage> damages = {
      {"a flipped byte", flipped, good_tokenizer},
      {"truncated", good.substr(0, good.size() - 3), good_tokenizer},
      {"empty", "", good_tokenizer},
      {"another file", "LINEATOK", good_tokenizer},
      {"a damaged tokenizer", good, good_tokenizer.substr(0, good_tokenizer.size() / 2)},
  };
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.what);
    write_bytes(f.tokens_path(), damage.tokens);
    write_bytes(tokenizer_path, damage.tokenizer);
    const Corpus rebuilt = f.load();
    ASSERT_FALSE(f.messages.empty());
    EXPECT_NE(f.messages.front().find("token cache unusable, rebuilding it"), std::string::npos) << f.messages.front();
    expect_same_corpus(original, rebuilt);
    EXPECT_EQ(read_file(f.tokens_path(), "test"), good) << "the rebuilt cache is byte for byte the original";
  }
  fs::remove(tokenizer_path);
  expect_same_corpus(original, f.load());
  EXPECT_NE(f.messages.front().find("does not exist"), std::string::npos);
}

TEST(TokenCache, AnUnwritableCacheIsOnlyAWarning) {
  CacheFixture f("byte");
  write_bytes(f.dir / "file", "a file where the cache directory should be");
  f.options.cache_dir = f.dir / "file";
  EXPECT_FALSE(f.load().train.empty());
  ASSERT_FALSE(f.messages.empty());
  EXPECT_NE(f.messages.back().find("could not write the token cache"), std::string::npos) << f.messages.back();
}

}  // namespace
}  // namespace linea::train
