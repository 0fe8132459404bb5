#pragma once
// A corpus is the token ids of its train / valid / test splits and the tokenizer that made them.
//
// load_corpus reads the text (train/corpus_text.h), builds the tokenizer from the train split
// alone (so valid and test stay unseen), and encodes the three splits. With a cache directory,
// the ids and the tokenizer are kept there (train/token_cache.h) and reused while both the source
// text (size, mtime and checksum) and the tokenizer are unchanged; a stale or damaged cache is
// rebuilt, with a message saying why.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "train/corpus_text.h"
#include "train/tokenizer.h"

namespace linea::train {

struct Corpus {
  std::string name;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::vector<int64_t> train, valid, test;
};

struct CorpusOptions {
  std::string data{};               // "" = the default corpus (fortunes); else a text file or a split directory
  std::string tokenizer = "byte";   // the kind to build from the train split: byte, char, word or bpe
  int64_t vocab_size = 4096;        // bpe's target vocabulary
  // Encode with this tokenizer instead of building one (a resumed run, a pretrained vocabulary).
  std::shared_ptr<const Tokenizer> given_tokenizer{};
  std::string cache_dir{};          // "" = no cache; see default_cache_dir()
  std::string fortunes_dir = kFortunesDir;
  // Where cache and progress messages go; unset = standard error.
  std::function<void(const std::string&)> log{};
};

Corpus load_corpus(const CorpusOptions& options);

// $LINEA_CACHE_DIR, else $XDG_CACHE_HOME/linea, else $HOME/.cache/linea, else "" (no cache).
std::string default_cache_dir();

// The cache file names load_corpus uses: <cache dir>/<corpus name>.<tag>.tokens and .tokenizer,
// where tag is the tokenizer kind, with the target vocabulary size for bpe ("bpe4096").
std::string token_cache_path(const std::string& cache_dir, const std::string& corpus_name, const std::string& tag);
std::string tokenizer_cache_path(const std::string& cache_dir, const std::string& corpus_name, const std::string& tag);

}  // namespace linea::train
