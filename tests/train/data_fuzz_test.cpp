// Fuzzing the readers of saved data: tokenizer files and token caches. Random bytes, truncations,
// flipped bytes, and (so that the parsers behind the checksums are exercised too) damage whose
// checksum has been recomputed. The only acceptable outcomes are a working object or a
// linea::Error; anything else (a crash, another exception type) fails the test.
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/train/data_test_util.h"
#include "tests/train/temp_dir.h"
#include "train/checksum.h"
#include "train/file_io.h"
#include "train/token_cache.h"
#include "train/tokenizer.h"

namespace linea::train {
namespace {

using linea::testing::multilingual_text;
using linea::testing::random_bytes;

// Applies one random kind of damage: flip bits, overwrite, insert, delete, truncate or duplicate.
std::string damage(std::mt19937_64& rng, std::string bytes) {
  const auto at = [&] { return bytes.empty() ? size_t{0} : static_cast<size_t>(rng() % bytes.size()); };
  switch (rng() % 6) {
    case 0:
      for (int i = 0, n = 1 + rng() % 3; i < n && !bytes.empty(); ++i)
        bytes[at()] ^= static_cast<char>(1 << (rng() % 8));
      break;
    case 1:
      if (!bytes.empty()) bytes[at()] = "0123456789 \n-x"[rng() % 14];
      break;
    case 2:
      bytes.insert(at(), random_bytes(rng, 1 + rng() % 4));
      break;
    case 3:
      if (!bytes.empty()) bytes.erase(at(), 1 + rng() % 4);
      break;
    case 4:
      bytes.resize(at());
      break;
    default: {
      const size_t from = at();
      bytes.insert(at(), bytes.substr(from, rng() % 16));
    }
  }
  return bytes;
}

// A tokenizer file's checksum line, recomputed over whatever precedes it.
std::string reseal_tokenizer(const std::string& bytes) {
  const size_t last = bytes.size() >= 2 ? bytes.rfind('\n', bytes.size() - 2) : std::string::npos;
  const std::string covered = last == std::string::npos ? bytes : bytes.substr(0, last + 1);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(covered)));
  return covered + "checksum " + hex + "\n";
}

// A token cache's trailing checksum, recomputed.
std::string reseal_cache(const std::string& bytes) {
  if (bytes.size() < 8) return bytes;
  std::string out = bytes.substr(0, bytes.size() - 8);
  const uint64_t sum = fnv1a64(out);
  for (int i = 0; i < 8; ++i) out += static_cast<char>(sum >> (8 * i));
  return out;
}

// Runs f, which may throw linea::Error and nothing else.
template <class F>
void survives(F f, const std::string& input) {
  try {
    f();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw " << typeid(e).name() << " (" << e.what() << ") on " << input.size() << " bytes";
  }
}

void use_tokenizer(const std::string& bytes) {
  const std::unique_ptr<Tokenizer> tokenizer = parse_tokenizer(bytes, "fuzz");
  // A file that parses must give a tokenizer that works.
  const std::vector<int64_t> ids = tokenizer->encode(multilingual_text());
  for (const int64_t id : ids) ASSERT_LT(id, tokenizer->vocab_size());
  tokenizer->decode(ids);
}

TEST(DataFuzz, TokenizerFilesNeverCrashTheLoader) {
  std::mt19937_64 rng(7);
  const linea::testing::TempDir dir;
  std::vector<std::string> seeds;
  for (const std::string& kind : tokenizer_kinds()) {
    const std::string path = dir / kind;
    build_tokenizer(kind, multilingual_text() + "the the the cat cat\n", 300)->save(path);
    seeds.push_back(read_file(path, "tokenizer"));
  }
  for (const std::string& seed : seeds) {
    for (size_t n = 0; n < seed.size(); n += 1 + seed.size() / 200)
      survives([&] { use_tokenizer(seed.substr(0, n)); }, seed);
    for (int trial = 0; trial < 1500; ++trial) {
      std::string bytes = damage(rng, seed);
      if (trial % 2) bytes = reseal_tokenizer(damage(rng, bytes));
      survives([&] { use_tokenizer(bytes); }, bytes);
    }
  }
  for (int trial = 0; trial < 300; ++trial) {
    const std::string bytes = random_bytes(rng, rng() % 200);
    survives([&] { use_tokenizer(bytes); }, bytes);
    survives([&] { use_tokenizer(reseal_tokenizer("linea-tokenizer 1 bpe\n" + bytes)); }, bytes);
  }
  // And through the file reader.
  const std::string path = dir / "damaged";
  for (int trial = 0; trial < 50; ++trial) {
    linea::testing::write_bytes(path, damage(rng, seeds[rng() % seeds.size()]));
    survives([&] { load_tokenizer(path); }, path);
  }
}

TEST(DataFuzz, TokenCachesNeverCrashTheReader) {
  std::mt19937_64 rng(8);
  CachedTokens tokens{{"bpe", 42, 1000, {123, 456, 789}}, {}, {}, {}};
  for (int i = 0; i < 100; ++i) tokens.train.push_back(static_cast<int64_t>(rng() % 1000));
  tokens.valid = {1, 2, 3};
  tokens.test = {999};
  const std::string seed = encode_token_cache(tokens);
  for (size_t n = 0; n <= seed.size(); ++n) survives([&] { decode_token_cache(seed.substr(0, n), "fuzz"); }, seed);
  for (int trial = 0; trial < 5000; ++trial) {
    std::string bytes = damage(rng, seed);
    if (trial % 2) bytes = reseal_cache(bytes);
    survives([&] { decode_token_cache(bytes, "fuzz"); }, bytes);
  }
  for (int trial = 0; trial < 500; ++trial) {
    const std::string bytes = reseal_cache("LINEATOK" + random_bytes(rng, rng() % 120));
    survives([&] { decode_token_cache(bytes, "fuzz"); }, bytes);
  }
  const linea::testing::TempDir dir;
  const std::string path = dir / "damaged.tokens";
  for (int trial = 0; trial < 50; ++trial) {
    linea::testing::write_bytes(path, damage(rng, seed));
    survives([&] { read_token_cache(path); }, path);
  }
}

}  // namespace
}  // namespace linea::train
