#pragma once
// A corpus of its own for the `linea paper` tests (--data), so that they do not depend on the
// machine's default corpus (Debian's fortunes: tools/setup.sh installs it, a bare GPU machine
// lacks it). About 60 kB of sentences over a small vocabulary, the same on every machine
// (std::mt19937's sequence is fixed by the standard).
#include <random>
#include <string>
#include <vector>

#include "tests/train/temp_dir.h"
#include "train/file_io.h"

namespace linea::testing {

// Writes DIR/corpus.txt and returns its path.
inline std::string write_paper_corpus(const TempDir& dir) {
  const std::vector<std::string> words = {"the", "gate", "opens", "and", "closes", "a", "state", "decays",
                                          "slowly", "while", "keys", "and", "values", "arrive", "in",
                                          "order", "each", "token", "reads", "what", "came", "before", "it"};
  std::mt19937 pick(12345);
  std::string text;
  while (text.size() < 60000) {
    const size_t length = 4 + pick() % 9;
    for (size_t i = 0; i < length; ++i) text += (i ? " " : "") + words[pick() % words.size()];
    text += ".\n";
  }
  const std::string path = dir / "corpus.txt";
  train::write_file_atomically(path, text);
  return path;
}

}  // namespace linea::testing
