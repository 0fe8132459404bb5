#pragma once
// The raw text of a corpus, already split into train / valid / test. Three sources:
//
//   read_text_file   one UTF-8 text file, split by lines: the first 90% of its lines train, the
//                    next 5% validate, the last 5% test. Contiguous, not interleaved, so that
//                    evaluation text is not made of lines whose neighbours were trained on.
//   read_split_dir   a directory holding train.txt, valid.txt and test.txt (the WikiText layout).
//   read_fortunes    the default corpus: Debian's `fortunes` package. Fortunes are independent
//                    documents, and its files are topical, so they are split by fortune, not by
//                    file: over all fortunes in file-name order, fortune i validates when
//                    i % 20 == 18, tests when i % 20 == 19, and trains otherwise (90/5/5). Each
//                    split is its fortunes, each followed by a "%" line: a fortune file again.
//
// Every source also yields a stamp (size, mtime, checksum) that token caches compare against.
#include <cstdint>
#include <string>

#include "train/checksum.h"

namespace linea::train {

inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// What the text was read from, summed over its files; a token cache built from different sources
// is stale.
struct SourceStamp {
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;           // the newest file's modification time, in Unix time
  uint64_t checksum = kFnvOffset;  // FNV-1a 64 of the files' contents, in reading order
  bool operator==(const SourceStamp&) const = default;
};

struct CorpusText {
  std::string name;    // names cache files: "fortunes", or the file or directory name and a path hash
  std::string origin;  // the path it came from, for messages
  std::string train, valid, test;
  SourceStamp stamp;
};

// require_utf8 (set for the char tokenizer) makes text that is not valid UTF-8 an error naming
// the file, the line and the byte offset. Missing or empty files and empty splits are errors too.
CorpusText read_text_file(const std::string& path, bool require_utf8);
CorpusText read_split_dir(const std::string& dir, bool require_utf8);
CorpusText read_fortunes(const std::string& dir, bool require_utf8);

// data = "" reads the fortunes in fortunes_dir; a directory, read_split_dir; a file, read_text_file.
CorpusText read_corpus_text(const std::string& data, const std::string& fortunes_dir, bool require_utf8);

}  // namespace linea::train
