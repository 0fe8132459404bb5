#include "train/corpus_text.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "tensor/error.h"
#include "train/file_io.h"
#include "train/utf8.h"

namespace linea::train {

namespace fs = std::filesystem;

namespace {

// Reads one source file into the stamp; every reader goes through here.
std::string read_source(const fs::path& path, bool require_utf8, SourceStamp& stamp) {
  std::string text = read_file(path.string(), "corpus text");
  LINEA_CHECK(!text.empty(), "corpus", "'", path.string(), "' is empty");
  if (require_utf8) {
    const size_t bad = utf8::first_invalid(text);
    LINEA_CHECK(bad == std::string::npos, "corpus", "'", path.string(), "' is not valid UTF-8 (line ",
                1 + std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(bad), '\n'), ", byte offset ", bad,
                "); the char tokenizer needs UTF-8 text: convert it (e.g. iconv -f latin1 -t utf-8) or use the byte "
                "or bpe tokenizer, which take any bytes");
  }
  std::error_code ec;
  const auto mtime = fs::last_write_time(path, ec);
  stamp.bytes += text.size();
  if (!ec) {
    // In Unix time: the file clock's own epoch is the library's choice (libstdc++'s is in 2174).
    const auto unix_time = std::chrono::file_clock::to_sys(mtime).time_since_epoch();
    const int64_t mtime_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(unix_time).count();
    stamp.mtime_ns = std::max(stamp.mtime_ns, mtime_ns);
  }
  stamp.checksum = fnv1a64(text, stamp.checksum);
  return text;
}

// A short hash of the absolute path keeps two "input.txt" corpora from sharing a cache name.
std::string name_with_path_hash(const fs::path& path) {
  std::error_code ec;
  const fs::path absolute = fs::weakly_canonical(path, ec);
  char hash[9];
  std::snprintf(hash, sizeof hash, "%08" PRIx32, static_cast<uint32_t>(fnv1a64((ec ? path : absolute).string())));
  const std::string stem = path.filename().empty() ? path.parent_path().filename().string() : path.stem().string();
  return stem + "-" + hash;
}

void check_splits(const CorpusText& text, const char* rule) {
  const std::pair<const char*, const std::string*> splits[] = {
      {"train", &text.train}, {"valid", &text.valid}, {"test", &text.test}};
  for (const auto& [split, contents] : splits)
    LINEA_CHECK(!contents->empty(), "corpus", "the ", split, " split of '", text.origin, "' is empty (", rule, ")");
}

}  // namespace

CorpusText read_text_file(const std::string& path, bool require_utf8) {
  CorpusText corpus{name_with_path_hash(path), path, {}, {}, {}, {}};
  const std::string text = read_source(path, require_utf8, corpus.stamp);
  std::vector<size_t> line_starts = {0};
  for (size_t i = 0; i + 1 < text.size(); ++i)
    if (text[i] == '\n') line_starts.push_back(i + 1);
  const size_t lines = line_starts.size();
  const auto offset_of_line = [&](size_t line) { return line < lines ? line_starts[line] : text.size(); };
  const size_t valid_start = offset_of_line(lines * 90 / 100), test_start = offset_of_line(lines * 95 / 100);
  corpus.train = text.substr(0, valid_start);
  corpus.valid = text.substr(valid_start, test_start - valid_start);
  corpus.test = text.substr(test_start);
  check_splits(corpus, "a single file is split 90/5/5 by lines, so it needs at least 20 lines");
  return corpus;
}

CorpusText read_split_dir(const std::string& dir, bool require_utf8) {
  CorpusText corpus{name_with_path_hash(fs::path(dir) / ""), dir, {}, {}, {}, {}};
  corpus.train = read_source(fs::path(dir) / "train.txt", require_utf8, corpus.stamp);
  corpus.valid = read_source(fs::path(dir) / "valid.txt", require_utf8, corpus.stamp);
  corpus.test = read_source(fs::path(dir) / "test.txt", require_utf8, corpus.stamp);
  return corpus;
}

CorpusText read_fortunes(const std::string& dir, bool require_utf8) {
  std::error_code ec;
  LINEA_CHECK(fs::is_directory(dir, ec), "corpus", "the default corpus is the text of Debian's fortunes, but '", dir,
              "' does not exist; install it with `sudo apt-get install fortunes`, or pass --data FILE or DIR "
              "to train on other text");
  // The plain fortune files only: not the *.dat indexes, not the *.u8 links to the same files.
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file() && !entry.is_symlink() && entry.path().extension() != ".dat")
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());

  CorpusText corpus{"fortunes", dir, {}, {}, {}, {}};
  std::string* splits_by_index[20];
  std::fill(std::begin(splits_by_index), std::end(splits_by_index), &corpus.train);
  splits_by_index[18] = &corpus.valid;
  splits_by_index[19] = &corpus.test;
  int64_t index = 0;
  const auto add_fortune = [&](std::string_view fortune) {
    if (fortune.empty()) return;
    std::string& split = *splits_by_index[index++ % 20];
    split += fortune;
    if (fortune.back() != '\n') split += '\n';
    split += "%\n";
  };
  for (const fs::path& file : files) {
    const std::string text = read_source(file, require_utf8, corpus.stamp);
    size_t fortune_start = 0;
    for (size_t line = 0; line < text.size();) {
      const size_t end = std::min(text.find('\n', line), text.size());
      if (std::string_view(text).substr(line, end - line) == "%") {
        add_fortune(std::string_view(text).substr(fortune_start, line - fortune_start));
        fortune_start = end + 1;
      }
      line = end + 1;
    }
    add_fortune(std::string_view(text).substr(std::min(fortune_start, text.size())));
  }
  check_splits(corpus, "fortunes are split 90/5/5 by fortune, so it needs at least 20");
  return corpus;
}

CorpusText read_corpus_text(const std::string& data, const std::string& fortunes_dir, bool require_utf8) {
  if (data.empty()) return read_fortunes(fortunes_dir, require_utf8);
  std::error_code ec;
  LINEA_CHECK(fs::exists(data, ec), "corpus", "'", data, "' does not exist (--data takes a text file or a directory "
              "holding train.txt, valid.txt and test.txt)");
  return fs::is_directory(data, ec) ? read_split_dir(data, require_utf8) : read_text_file(data, require_utf8);
}

}  // namespace linea::train
