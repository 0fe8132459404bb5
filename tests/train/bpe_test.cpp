// Byte-pair encoding: the pre-split rule, what the first merges must be on a text built to force
// them, determinism, and encoding that replays training.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <set>

#include "tests/test_util.h"
#include "tests/train/data_test_util.h"
#include "train/bpe_tokenizer.h"
#include "train/corpus_text.h"

namespace linea::train {
namespace {

using linea::testing::multilingual_text;
using linea::testing::random_bytes;
using linea::testing::zipf_text;

std::vector<std::string> pieces_of(std::string_view text) {
  std::vector<std::string> out;
  for (const std::string_view piece : split_pieces(text)) out.emplace_back(piece);
  return out;
}

TEST(Bpe, PiecesAreWordsWithTheirLeadingSpace) {
  EXPECT_EQ(pieces_of("Hello, world 42times!\n\n  naïve  x"),
            (std::vector<std::string>{"Hello", ",", " world", " 42", "times", "!", "\n\n ", " naïve", " ", " x"}));
  EXPECT_EQ(pieces_of("a\tb  "), (std::vector<std::string>{"a", "\t", "b", "  "}));
  EXPECT_TRUE(pieces_of("").empty());
  std::mt19937_64 rng(3);
  for (const std::string& text : {multilingual_text(), random_bytes(rng, 5000)}) {
    std::string joined;
    for (const std::string_view piece : split_pieces(text)) {
      ASSERT_FALSE(piece.empty());
      joined += piece;
    }
    EXPECT_EQ(joined, text);
  }
}

TEST(Bpe, MergesTheMostFrequentPairFirst) {
  // Pieces "ab", " ab" x2, " abcd" x2, " cd": (a,b) occurs 5 times, then (' ', ab) 4 times as
  // " ab", then (c,d) 3 times.
  const BpeTokenizer bpe = train_bpe("ab ab abcd abcd cd ab", 1000);
  ASSERT_GE(bpe.vocab_size(), 259);
  EXPECT_EQ(bpe.merges()[0], (BpeTokenizer::Pair{'a', 'b'}));
  EXPECT_EQ(bpe.merges()[1], (BpeTokenizer::Pair{' ', 256}));
  EXPECT_EQ(bpe.merges()[2], (BpeTokenizer::Pair{'c', 'd'}));
  EXPECT_EQ(bpe.bytes_of(257), " ab");
  EXPECT_EQ(bpe.bytes_of(258), "cd");
}

TEST(Bpe, TiesGoToTheSmallestPair) {
  // (a,b), (' ',c) and (c,d) all occur twice: (' ', 'c') = (32, 99) is the smallest. Then (a,b)
  // = (97, 98) and (" c", d) = (256, 100) tie, and (97, 98) is smaller.
  const BpeTokenizer bpe = train_bpe("ab ab cd cd", 1000);
  EXPECT_EQ(bpe.merges(), (std::vector<BpeTokenizer::Pair>{{' ', 'c'}, {'a', 'b'}, {256, 'd'}}));
}

TEST(Bpe, NeverMergesAcrossPieces) {
  // "a." would be the most frequent pair if merges could cross the letter/punctuation boundary.
  const BpeTokenizer bpe = train_bpe("a.a.a.a.a.a. xy xy", 300);
  for (int64_t id = 256; id < bpe.vocab_size(); ++id) {
    const std::string& bytes = bpe.bytes_of(id);
    EXPECT_EQ(split_pieces(bytes).size(), 1u) << "'" << bytes << "' straddles two pieces";
  }
}

TEST(Bpe, StopsWhenNoPairRepeats) {
  const BpeTokenizer bpe = train_bpe("abcdef", 1000);
  EXPECT_EQ(bpe.vocab_size(), 256);
  EXPECT_LINEA_ERROR(train_bpe("abc", 100), "below the 256 byte ids");
}

TEST(Bpe, TrainingIsDeterministicAndCompresses) {
  std::mt19937_64 rng(4);
  const std::string text = zipf_text(rng, 20000) + multilingual_text();
  const BpeTokenizer first = train_bpe(text, 512), second = train_bpe(text, 512);
  EXPECT_EQ(first.merges(), second.merges());
  EXPECT_EQ(first.fingerprint(), second.fingerprint());
  // Merges are byte strings that occur in the text, each made once.
  std::set<std::string> seen;
  for (int64_t id = 256; id < first.vocab_size(); ++id) {
    EXPECT_NE(text.find(first.bytes_of(id)), std::string::npos);
    EXPECT_TRUE(seen.insert(first.bytes_of(id)).second) << "'" << first.bytes_of(id) << "' made twice";
  }
  const std::vector<int64_t> ids = first.encode(text);
  EXPECT_EQ(first.decode(ids), text);
  EXPECT_LT(ids.size() * 3, text.size()) << "a 512-token vocabulary should cover this small language well";
}

TEST(Bpe, EncodingReplaysTraining) {
  // Every frequent word of the training text was merged into one token, and encoding finds it.
  std::mt19937_64 rng(5);
  const BpeTokenizer bpe = train_bpe(zipf_text(rng, 20000), 1000);
  for (const std::string word : {" the", " language", " gradient", " attention"})
    EXPECT_EQ(bpe.encode(word).size(), 1u) << "'" << word << "'";
}

// Measures BPE training to 4096 tokens and encoding speed on the default corpus (and WikiText-2's
// training split when present). Disabled by default: timings on a shared machine are not
// pass/fail. Run with --gtest_also_run_disabled_tests --gtest_filter='Bpe.DISABLED_*'. CPU time
// is printed beside wall time because the machine may be busy.
struct Stopwatch {
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  std::clock_t cpu = std::clock();
  std::string str() const {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.2f s wall, %.2f s cpu",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count(),
                  static_cast<double>(std::clock() - cpu) / CLOCKS_PER_SEC);
    return buffer;
  }
};

void time_bpe(const std::string& name, const std::string& text) {
  const Stopwatch train;
  const BpeTokenizer bpe = train_bpe(text, 4096);
  const std::string train_time = train.str();
  const Stopwatch encode;
  const std::vector<int64_t> ids = bpe.encode(text);
  const std::string encode_time = encode.str();
  std::printf("%s: %zu bytes; bpe to %lld tokens in %s; encoded to %zu ids (%.2f bytes/token) in %s\n",
              name.c_str(), text.size(), static_cast<long long>(bpe.vocab_size()), train_time.c_str(), ids.size(),
              static_cast<double>(text.size()) / static_cast<double>(ids.size()), encode_time.c_str());
  EXPECT_EQ(bpe.vocab_size(), 4096);
}

TEST(Bpe, DISABLED_Timing) {
  if (std::filesystem::is_directory(kFortunesDir)) time_bpe("fortunes train", read_fortunes(kFortunesDir, false).train);
  const std::string wikitext = "/work/shared/data/wikitext-2";
  if (std::filesystem::is_directory(wikitext)) time_bpe("wikitext-2 train", read_split_dir(wikitext, false).train);
}

}  // namespace
}  // namespace linea::train
