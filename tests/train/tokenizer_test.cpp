// Tokenizers: lossless round trips where promised, the documented handling of unknown and invalid
// input, save/load round trips, and clear errors for files that are missing, damaged or of
// another kind.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "tests/test_util.h"
#include "tests/train/data_test_util.h"
#include "tests/train/temp_dir.h"
#include "train/bpe_tokenizer.h"
#include "train/byte_tokenizer.h"
#include "train/char_tokenizer.h"
#include "train/checksum.h"
#include "train/file_io.h"
#include "train/utf8.h"
#include "train/word_tokenizer.h"

namespace linea::train {
namespace {

using linea::testing::multilingual_text;
using linea::testing::random_bytes;
using linea::testing::TempDir;
using linea::testing::write_bytes;

// One tokenizer of each kind, its vocabulary built from a training text.
std::vector<std::shared_ptr<Tokenizer>> every_kind(std::string_view text) {
  std::vector<std::shared_ptr<Tokenizer>> all;
  for (const std::string& kind : tokenizer_kinds()) all.push_back(build_tokenizer(kind, text, 400));
  return all;
}

void expect_ids_in_vocab(const Tokenizer& tokenizer, const std::vector<int64_t>& ids) {
  for (const int64_t id : ids) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, tokenizer.vocab_size());
  }
}

TEST(Tokenizer, ByteAndBpeAreLosslessOnRandomBytes) {
  std::mt19937_64 rng(1);
  const ByteTokenizer bytes;
  const BpeTokenizer bpe = train_bpe(random_bytes(rng, 20000) + multilingual_text(), 600);
  for (int trial = 0; trial < 20; ++trial) {
    const std::string text = random_bytes(rng, rng() % 3000);
    for (const Tokenizer* tokenizer : {static_cast<const Tokenizer*>(&bytes), static_cast<const Tokenizer*>(&bpe)}) {
      const std::vector<int64_t> ids = tokenizer->encode(text);
      expect_ids_in_vocab(*tokenizer, ids);
      EXPECT_EQ(tokenizer->decode(ids), text) << tokenizer->name();
    }
  }
}

TEST(Tokenizer, EveryKindIsLosslessOnTextItWasBuiltFrom) {
  // Word-level normalises whitespace, so its text is given in normal form: single spaces, no
  // space at a line's ends, '\n' after every line.
  const std::string normal_form = "Ελληνικά : Η γρήγορη αλεπού\n中文 快速的 👩‍💻 🇫🇷\nnaïve café\n";
  for (const std::string& text : {multilingual_text(), normal_form}) {
    for (const auto& tokenizer : every_kind(text)) {
      if (tokenizer->name() == WordTokenizer::kKind && text != normal_form) continue;
      const std::vector<int64_t> ids = tokenizer->encode(text);
      expect_ids_in_vocab(*tokenizer, ids);
      EXPECT_EQ(tokenizer->decode(ids), text) << tokenizer->name();
    }
  }
}

TEST(Tokenizer, CharIsOneIdPerCodePoint) {
  const CharTokenizer chars = CharTokenizer::from_text("héllo 👋");
  EXPECT_EQ(chars.vocab_size(), 7);  // <unk> h é l o space 👋
  EXPECT_EQ(chars.encode("héllo 👋").size(), 7u);
  EXPECT_EQ(chars.chars().front(), U' ');  // code point order
  EXPECT_EQ(chars.chars().back(), U'👋');
}

TEST(Tokenizer, CharMapsUnknownCharactersAndEachInvalidByteToUnk) {
  const CharTokenizer chars = CharTokenizer::from_text("abc");
  EXPECT_EQ(chars.encode("axb"), (std::vector<int64_t>{1, CharTokenizer::kUnkId, 2}));
  // Overlong '/', a surrogate, beyond U+10FFFF, a truncated euro sign, a lone continuation byte.
  for (const std::string bad : {"\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE2\x82", "\x80"}) {
    const std::vector<int64_t> ids = chars.encode("a" + bad + "c");
    ASSERT_EQ(ids.size(), bad.size() + 2) << "one <unk> per invalid byte";
    EXPECT_EQ(ids.front(), 1);
    EXPECT_EQ(ids.back(), 3);
    for (size_t i = 1; i + 1 < ids.size(); ++i) EXPECT_EQ(ids[i], CharTokenizer::kUnkId);
  }
  EXPECT_EQ(chars.decode(std::vector<int64_t>{1, CharTokenizer::kUnkId, 3}), "a\uFFFDc");
}

TEST(Tokenizer, CharSurvivesRandomBytes) {
  std::mt19937_64 rng(2);
  const CharTokenizer chars = CharTokenizer::from_text(random_bytes(rng, 5000));
  for (int trial = 0; trial < 20; ++trial) {
    const std::string text = random_bytes(rng, 2000);
    const std::vector<int64_t> ids = chars.encode(text);
    expect_ids_in_vocab(chars, ids);
    const std::string decoded = chars.decode(ids);
    // Known characters come back as they were; invalid bytes and unseen characters as U+FFFD.
    std::string expected;
    for (size_t pos = 0; pos < text.size();) {
      const size_t start = pos;
      const int32_t c = utf8::next(text, pos);
      const bool known = c != utf8::kInvalid && std::binary_search(chars.chars().begin(), chars.chars().end(), c);
      expected += known ? text.substr(start, pos - start) : std::string("\uFFFD");
    }
    EXPECT_TRUE(decoded == expected) << "trial " << trial;  // (not EXPECT_EQ: binary strings print badly)
  }
}

TEST(Tokenizer, ReencodingDecodedIdsGivesThemBack) {
  // decode is lossy for word and char (whitespace, <unk>), but what it loses was already lost:
  // encoding its output reproduces the ids. (U+FFFD is kept out of the char vocabulary, where it
  // would stop being <unk>'s stand-in.)
  std::mt19937_64 rng(9);
  const std::string train_text = random_bytes(rng, 3000) + multilingual_text();
  const auto all = every_kind(train_text);
  for (int trial = 0; trial < 20; ++trial) {
    const std::string text = random_bytes(rng, 1000) + multilingual_text();
    for (const auto& tokenizer : all) {
      const std::vector<int64_t> ids = tokenizer->encode(text);
      EXPECT_EQ(tokenizer->encode(tokenizer->decode(ids)), ids) << tokenizer->name();
    }
  }
}

TEST(Tokenizer, WordFollowsTheWikiTextConvention) {
  const WordTokenizer words = WordTokenizer::from_text(" = Title = \n \n a <unk> b \n");
  // Ids in order of first appearance, <eos> included, as PyTorch's word_language_model numbers them.
  EXPECT_EQ(words.words(), (std::vector<std::string>{"=", "Title", "<eos>", "a", "<unk>", "b"}));
  EXPECT_EQ(words.eos_id(), 2);
  EXPECT_EQ(words.unk_id(), 4);
  EXPECT_EQ(words.encode(" a zebra b \n\n"), (std::vector<int64_t>{3, 4, 5, 2, 2}));
  EXPECT_EQ(words.encode("a b"), (std::vector<int64_t>{3, 5, 2})) << "a last line without '\\n' still ends in <eos>";
  EXPECT_EQ(words.encode("\t a \r\n"), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(words.decode(std::vector<int64_t>{0, 1, 0, 2, 3, 2}), "= Title =\na\n");
  EXPECT_TRUE(words.encode("").empty());
}

TEST(Tokenizer, WordAddsUnkWhenTheTrainingTextLacksIt) {
  const WordTokenizer words = WordTokenizer::from_text("hello world\n");
  EXPECT_EQ(words.words(), (std::vector<std::string>{"hello", "world", "<eos>", "<unk>"}));
  EXPECT_EQ(words.encode("hello there\n"), (std::vector<int64_t>{0, 3, 2}));
  EXPECT_EQ(WordTokenizer::from_text("").vocab_size(), 2);
}

TEST(Tokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  for (const auto& tokenizer : every_kind("some text\n")) {
    SCOPED_TRACE(tokenizer->name());
    EXPECT_LINEA_ERROR(tokenizer->decode(std::vector<int64_t>{tokenizer->vocab_size()}), "outside");
    EXPECT_LINEA_ERROR(tokenizer->decode(std::vector<int64_t>{-1}), "outside");
  }
}

TEST(Tokenizer, SaveAndLoadRoundTripEveryKind) {
  const TempDir dir;
  const std::string text = multilingual_text() + "the cat sat on the mat\n the cat \n";
  for (const auto& tokenizer : every_kind(text)) {
    SCOPED_TRACE(tokenizer->name());
    const std::string path = dir / (tokenizer->name() + ".tokenizer");
    tokenizer->save(path);
    const std::unique_ptr<Tokenizer> loaded = load_tokenizer(path);
    EXPECT_EQ(loaded->name(), tokenizer->name());
    EXPECT_EQ(loaded->vocab_size(), tokenizer->vocab_size());
    EXPECT_EQ(loaded->fingerprint(), tokenizer->fingerprint());
    EXPECT_EQ(loaded->encode(text), tokenizer->encode(text));
    EXPECT_EQ(parse_tokenizer(tokenizer->file_contents(), "memory")->fingerprint(), tokenizer->fingerprint());
  }
  EXPECT_NE(build_tokenizer("char", "ab", 0)->fingerprint(), build_tokenizer("char", "ac", 0)->fingerprint());
  EXPECT_EQ(CharTokenizer::load(dir / "char.tokenizer")->vocab_size(), build_tokenizer("char", text, 0)->vocab_size());
}

TEST(Tokenizer, LoadingAnotherKindIsAnError) {
  const TempDir dir;
  CharTokenizer::from_text("abc").save(dir / "char.tokenizer");
  EXPECT_LINEA_ERROR(ByteTokenizer::load(dir / "char.tokenizer"), "holds a char tokenizer, not a byte tokenizer");
  EXPECT_LINEA_ERROR(BpeTokenizer::load(dir / "char.tokenizer"), "not a bpe tokenizer");
}

// Writes a tokenizer file with a correct checksum around the given header and body, so that the
// parser behind the checksum is what gets tested.
std::string with_checksum(const std::string& header_and_body) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(header_and_body)));
  return header_and_body + "checksum " + hex + "\n";
}

TEST(Tokenizer, DamagedFilesAreClearErrors) {
  const TempDir dir;
  const std::string path = dir / "t.tokenizer";
  EXPECT_LINEA_ERROR(load_tokenizer(dir / "missing"), "does not exist", "missing");
  EXPECT_LINEA_ERROR(load_tokenizer(dir.path()), "not a regular file");

  CharTokenizer::from_text("hello").save(path);
  const std::string good = read_file(path, "test");
  write_bytes(path, good.substr(0, good.size() / 2));
  EXPECT_LINEA_ERROR(load_tokenizer(path), path.c_str(), "truncated");
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x01;
  write_bytes(path, flipped);
  EXPECT_LINEA_ERROR(load_tokenizer(path), "checksum does not match");
  write_bytes(path, "");
  EXPECT_LINEA_ERROR(load_tokenizer(path), "not a linea tokenizer file");
  write_bytes(path, "{\"vocab\": []}\n");
  EXPECT_LINEA_ERROR(load_tokenizer(path), "not a linea tokenizer file");

  const std::pair<std::string, const char*> bad_contents[] = {
      {"linea-tokenizer 2 byte\n", "format version 2"},
      {"linea-tokenizer 1 sentencepiece\n", "unknown tokenizer kind 'sentencepiece'"},
      {"linea-tokenizer 1 byte\nextra\n", "extra lines"},
      {"linea-tokenizer 1 char\nchars 2\n97\n", "ends early"},
      {"linea-tokenizer 1 char\nchars 2\n98\n97\n", "strictly increasing"},
      {"linea-tokenizer 1 char\nchars 1\n55296\n", "not a Unicode code point"},
      {"linea-tokenizer 1 word\nwords 2\n<eos>\nhello\n", "lacks"},
      {"linea-tokenizer 1 word\nwords 3\n<eos>\n<unk>\n<eos>\n", "appears twice"},
      {"linea-tokenizer 1 bpe\nmerges 1\n97 256\n", "right id 256 is outside [0, 255]"},
      {"linea-tokenizer 1 bpe\nmerges 2\n97 98\n97 98\n", "repeats an earlier merge"},
      {"linea-tokenizer 1 bpe\nmerges x\n", "expected an integer"},
  };
  for (const auto& [contents, message] : bad_contents) {
    write_bytes(path, with_checksum(contents));
    EXPECT_LINEA_ERROR(load_tokenizer(path), message, path.c_str());
  }
}

}  // namespace
}  // namespace linea::train
