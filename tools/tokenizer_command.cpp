// `linea tokenizer train|encode`: train a byte-level BPE (or build another kind) from a corpus's
// training split and save it; or show how a saved tokenizer splits a text.
#include <cstdio>

#include "tools/commands.h"
#include "tools/flags.h"
#include "train/corpus_text.h"
#include "train/tokenizer.h"

namespace linea::cli {

namespace {

int train_tokenizer(const std::string& program, std::span<const std::string> args) {
  std::string data, kind = "bpe", out;
  int64_t vocab_size = 4096;
  Flags flags(program, "Builds a tokenizer from the training split of a corpus and saves it to a file\n"
                       "(then: linea train --tokenizer-file FILE).");
  flags.add("data", &data, "text file or train/valid/test directory; empty: the fortunes corpus");
  flags.add_choice("kind", &kind, {"byte", "char", "word", "bpe"}, "tokenizer kind");
  flags.add("vocab-size", &vocab_size, "target vocabulary size (bpe)");
  flags.add("out", &out, "file to write");
  if (!flags.parse(args)) return 0;
  if (out.empty()) flags.fail("--out is required");
  if (vocab_size < 256 && kind == "bpe") flags.fail("--vocab-size must be at least 256 for bpe");
  const train::CorpusText text = train::read_corpus_text(data, train::kFortunesDir, kind == "char");
  const auto tokenizer = train::build_tokenizer(kind, text.train, vocab_size);
  tokenizer->save(out);
  std::printf("%s tokenizer with %lld ids from %s (%zu bytes of training text) written to %s\n", kind.c_str(),
              static_cast<long long>(tokenizer->vocab_size()), text.origin.c_str(), text.train.size(), out.c_str());
  return 0;
}

int encode_text(const std::string& program, std::span<const std::string> args) {
  std::string file, text;
  Flags flags(program, "Shows the ids and pieces a saved tokenizer gives a text.");
  flags.add("tokenizer", &file, "tokenizer file");
  flags.add_positional("TEXT", &text, "text to encode");
  if (!flags.parse(args)) return 0;
  if (file.empty()) flags.fail("--tokenizer is required");
  const auto tokenizer = train::load_tokenizer(file);
  const std::vector<int64_t> ids = tokenizer->encode(text);
  for (int64_t id : ids) {
    const int64_t one[] = {id};
    std::printf("%lld\t%s\n", static_cast<long long>(id), tokenizer->decode(one).c_str());
  }
  std::printf("%zu tokens\n", ids.size());
  return 0;
}

int run(const std::string& program, std::span<const std::string> args) {
  static const std::vector<Command> actions = {
      {"train", "build a tokenizer from a corpus and save it", train_tokenizer},
      {"encode", "show how a saved tokenizer splits a text", encode_text},
  };
  return dispatch({program, "action", actions}, args);
}

}  // namespace

Command tokenizer_command() { return {"tokenizer", "train or inspect a tokenizer", run}; }

}  // namespace linea::cli
