// Corpora: the three sources and their splits, the default fortunes corpus, the errors a user can
// run into, and WikiText-2's published counts (skipped without the shared data).
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/test_util.h"
#include "tests/train/data_test_util.h"
#include "tests/train/temp_dir.h"
#include "train/corpus.h"
#include "train/word_tokenizer.h"

namespace linea::train {
namespace {

namespace fs = std::filesystem;
using linea::testing::TempDir;
using linea::testing::write_bytes;

constexpr const char* kWikiText2 = "/work/shared/data/wikitext-2";

std::string numbered_lines(int from, int to) {
  std::string text;
  for (int i = from; i < to; ++i) text += "line " + std::to_string(i) + "\n";
  return text;
}

int64_t count_of(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + what.size())) ++n;
  return n;
}

TEST(CorpusText, AFileSplitsNinetyFiveFiveByLines) {
  const TempDir dir;
  write_bytes(dir / "input.txt", numbered_lines(0, 40));
  const CorpusText text = read_text_file(dir / "input.txt", true);
  EXPECT_EQ(text.train, numbered_lines(0, 36));
  EXPECT_EQ(text.valid, numbered_lines(36, 38));
  EXPECT_EQ(text.test, numbered_lines(38, 40));
  EXPECT_EQ(text.name.substr(0, 6), "input-");
  EXPECT_EQ(text.stamp.bytes, numbered_lines(0, 40).size());
  EXPECT_GT(text.stamp.mtime_ns, int64_t{1'600'000'000} * 1'000'000'000) << "Unix time, in nanoseconds";

  write_bytes(dir / "unterminated.txt", numbered_lines(0, 39) + "last");
  EXPECT_EQ(read_text_file(dir / "unterminated.txt", false).test, "line 38\nlast");
}

TEST(CorpusText, ADirectoryHoldsTheThreeSplits) {
  const TempDir dir;
  write_bytes(dir / "train.txt", "a b\n");
  write_bytes(dir / "valid.txt", "c\n");
  write_bytes(dir / "test.txt", "d\n");
  const CorpusText text = read_corpus_text(dir.path(), "", false);
  EXPECT_EQ(text.train, "a b\n");
  EXPECT_EQ(text.valid, "c\n");
  EXPECT_EQ(text.test, "d\n");
  EXPECT_EQ(text.stamp.bytes, 8u);
}

TEST(CorpusText, FortunesSplitByFortuneInFileNameOrder) {
  const TempDir dir;
  std::string a, b;
  for (int i = 0; i < 30; ++i) a += "fortune " + std::to_string(i) + "\nsecond line\n%\n";
  for (int i = 30; i < 40; ++i) b += "fortune " + std::to_string(i) + "\n%\n";
  b += "fortune 40, unterminated";
  write_bytes(dir / "b", b);
  write_bytes(dir / "a", a);
  write_bytes(dir / "a.dat", "binary index that must be skipped");
  fs::create_symlink("a", dir / "a.u8");
  fs::create_directory(dir / "off");
  write_bytes(dir / "off/x", "skipped too\n%\n");

  const CorpusText text = read_fortunes(dir.path(), true);
  EXPECT_EQ(text.name, "fortunes");
  EXPECT_EQ(text.valid, "fortune 18\nsecond line\n%\nfortune 38\n%\n");
  EXPECT_EQ(text.test, "fortune 19\nsecond line\n%\nfortune 39\n%\n");
  EXPECT_EQ(count_of(text.train, "%\n"), 41 - 4);
  EXPECT_EQ(text.train.substr(0, 23), "fortune 0\nsecond line\n%");
  EXPECT_NE(text.train.find("fortune 40, unterminated\n%\n"), std::string::npos);
  EXPECT_EQ(text.train.find("skipped"), std::string::npos);
  EXPECT_EQ(text.train.find("binary"), std::string::npos);
  EXPECT_EQ(text.stamp.bytes, a.size() + b.size()) << "only the plain files are read";
}

TEST(CorpusText, TheDefaultCorpusIsDeterministic) {
  if (!fs::is_directory(kFortunesDir)) GTEST_SKIP() << kFortunesDir << " is missing (apt-get install fortunes)";
  const CorpusText first = read_fortunes(kFortunesDir, true), second = read_fortunes(kFortunesDir, true);
  EXPECT_EQ(first.train, second.train);
  EXPECT_EQ(first.valid, second.valid);
  EXPECT_EQ(first.test, second.test);
  EXPECT_EQ(first.stamp, second.stamp);
  const int64_t valid = count_of(first.valid, "\n%\n"), test = count_of(first.test, "\n%\n"),
                train = count_of(first.train, "\n%\n");
  const int64_t total = train + valid + test;
  EXPECT_GT(total, 10000);
  EXPECT_EQ(valid, total / 20 + (total % 20 > 18 ? 1 : 0));  // fortunes 18, 38, 58, ...
  EXPECT_EQ(test, total / 20);                                 // fortunes 19, 39, 59, ...
}

TEST(CorpusText, MissingOrEmptyInputIsAClearError) {
  const TempDir dir;
  EXPECT_LINEA_ERROR(read_corpus_text(dir / "nope.txt", "", false), "nope.txt", "does not exist");
  EXPECT_LINEA_ERROR(read_corpus_text("", dir / "no-fortunes", false), "sudo apt-get install fortunes", "--data");
  write_bytes(dir / "empty.txt", "");
  EXPECT_LINEA_ERROR(read_corpus_text(dir / "empty.txt", "", false), "empty.txt", "is empty");
  write_bytes(dir / "short.txt", numbered_lines(0, 5));
  EXPECT_LINEA_ERROR(read_corpus_text(dir / "short.txt", "", false), "short.txt", "split", "is empty",
                     "at least 20 lines");
  fs::create_directory(dir / "splits");
  write_bytes(dir / "splits/train.txt", "a\n");
  write_bytes(dir / "splits/valid.txt", "b\n");
  EXPECT_LINEA_ERROR(read_corpus_text(dir / "splits", "", false), "test.txt", "does not exist");
  write_bytes(dir / "splits/test.txt", "");
  EXPECT_LINEA_ERROR(read_corpus_text(dir / "splits", "", false), "test.txt", "is empty");
  fs::create_directory(dir / "few-fortunes");
  write_bytes(dir / "few-fortunes/f", "one\n%\ntwo\n%\n");
  EXPECT_LINEA_ERROR(read_corpus_text("", dir / "few-fortunes", false), "valid split", "at least 20");
}

TEST(CorpusText, TheCharTokenizerRefusesInvalidUtf8) {
  const TempDir dir;
  write_bytes(dir / "latin1.txt", numbered_lines(0, 30) + "caf\xE9\n" + numbered_lines(30, 40));
  EXPECT_LINEA_ERROR(read_text_file(dir / "latin1.txt", true), "latin1.txt", "not valid UTF-8", "line 31",
                     "byte offset");
  EXPECT_NO_THROW(read_text_file(dir / "latin1.txt", false));
  CorpusOptions options;
  options.data = dir / "latin1.txt";
  options.tokenizer = "char";
  EXPECT_LINEA_ERROR(load_corpus(options), "not valid UTF-8");
  options.tokenizer = "byte";
  EXPECT_EQ(load_corpus(options).train.size(), read_text_file(options.data, false).train.size());
  options.tokenizer = "sentencepiece";
  EXPECT_LINEA_ERROR(load_corpus(options), "unknown tokenizer 'sentencepiece'");
}

TEST(Corpus, EncodesEachSplitWithATokenizerBuiltFromTrainOnly) {
  const TempDir dir;
  write_bytes(dir / "train.txt", "the cat sat\nthe dog sat\n");
  write_bytes(dir / "valid.txt", "the cat ran\n");
  write_bytes(dir / "test.txt", "a dog\n");
  CorpusOptions options;
  options.data = dir.path();
  options.tokenizer = "word";
  const Corpus corpus = load_corpus(options);
  ASSERT_EQ(corpus.tokenizer->name(), "word");
  EXPECT_EQ(corpus.tokenizer->vocab_size(), 6);  // the cat sat <eos> dog <unk>: train's words only
  EXPECT_EQ(corpus.tokenizer->decode(corpus.valid), "the cat <unk>\n");
  EXPECT_EQ(corpus.tokenizer->decode(corpus.test), "<unk> dog\n");
  EXPECT_EQ(corpus.train.size(), 8u);
}

TEST(Corpus, WikiText2HasThePublishedCounts) {
  if (!fs::is_directory(kWikiText2)) GTEST_SKIP() << kWikiText2 << " is missing: the shared data is not mounted";
  CorpusOptions options;
  options.data = kWikiText2;
  options.tokenizer = "word";
  const Corpus corpus = load_corpus(options);
  EXPECT_EQ(corpus.train.size(), 2088628u);
  EXPECT_EQ(corpus.valid.size(), 217646u);
  EXPECT_EQ(corpus.test.size(), 245569u);
  EXPECT_EQ(corpus.tokenizer->vocab_size(), 33278);
  // Every word of valid and test is in the training vocabulary, so <unk> there is WikiText's own.
  const auto& words = dynamic_cast<const WordTokenizer&>(*corpus.tokenizer);
  EXPECT_EQ(words.eos_id(), 0) << "ids follow PyTorch's word_language_model: the first line is empty";
  EXPECT_EQ(words.words()[1], "=");
}

}  // namespace
}  // namespace linea::train
