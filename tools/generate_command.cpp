// `linea generate`: text from a checkpoint. Linear and gated layers decode from their recurrent
// state (constant work per token), softmax layers from a KV cache.
//
// A prompt the checkpoint's tokenizer cannot fully encode (a character a char tokenizer never saw
// in training, a word outside a word vocabulary) is refused, naming what cannot be encoded: the
// model would otherwise see <unk> in its place, and the continuation would follow from a prompt
// the user did not write. --drop-unknown leaves those pieces out instead, with a warning.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "tools/commands.h"
#include "tools/flags.h"
#include "train/generate.h"
#include "train/saved_model.h"
#include "train/utf8.h"
#include "train/word_tokenizer.h"

namespace linea::cli {

namespace {

namespace utf8 = train::utf8;

// A piece of the prompt as a message shows it: in quotes, control characters and bytes that are
// not UTF-8 escaped (\n, \x1B, \xFF), and a single character's code point after it ('é' U+00E9).
std::string describe_piece(std::string_view piece) {
  std::string quoted = "'";
  int characters = 0;
  int32_t last = utf8::kInvalid;
  for (size_t pos = 0; pos < piece.size(); ++characters) {
    const size_t start = pos;
    last = utf8::next(piece, pos);
    char escaped[8] = "";
    if (last == '\n') std::snprintf(escaped, sizeof escaped, "\\n");
    else if (last == '\t') std::snprintf(escaped, sizeof escaped, "\\t");
    else if (last == utf8::kInvalid || last < 0x20 || last == 0x7F)
      std::snprintf(escaped, sizeof escaped, "\\x%02X", static_cast<unsigned char>(piece[start]));
    if (escaped[0] != '\0') quoted += escaped;
    else quoted += piece.substr(start, pos - start);
  }
  quoted += "'";
  if (characters == 1 && last == utf8::kInvalid) return quoted + " (a byte that is not UTF-8)";
  if (characters == 1) {
    char code[16];
    std::snprintf(code, sizeof code, " (U+%04X)", static_cast<unsigned>(last));
    quoted += code;
  }
  return quoted;
}

// "'Z' (U+005A) at character 5, 'é' (U+00E9) at character 6 and 3 more": the first few pieces,
// each with its position in the prompt counted in characters from 1.
std::string list_pieces(std::string_view text, const std::vector<train::Unencodable>& pieces) {
  constexpr size_t kListed = 5;
  std::string list;
  size_t pos = 0, characters = 0;
  for (size_t i = 0; i < pieces.size() && i < kListed; ++i) {
    for (; pos < pieces[i].offset; ++characters) utf8::next(text, pos);
    if (i > 0) list += ", ";
    list += describe_piece(text.substr(pieces[i].offset, pieces[i].size)) + " at character " +
            std::to_string(characters + 1);
  }
  if (pieces.size() > kListed) list += " and " + std::to_string(pieces.size() - kListed) + " more";
  return list;
}

// The text without the pieces.
std::string without(std::string_view text, const std::vector<train::Unencodable>& pieces) {
  std::string kept;
  size_t pos = 0;
  for (const train::Unencodable& piece : pieces) {
    kept += text.substr(pos, piece.offset - pos);
    pos = piece.offset + piece.size;
  }
  return kept += text.substr(pos);
}

// The prompt the model will see: prompt itself when the tokenizer encodes all of it; otherwise an
// Error naming what it cannot encode, or with drop_unknown, a warning and the prompt without it.
std::string checked_prompt(const std::string& prompt, const train::Tokenizer& tokenizer, bool drop_unknown) {
  const std::vector<train::Unencodable> unknown = tokenizer.unencodable(prompt);
  if (unknown.empty()) return prompt;
  const bool words = tokenizer.name() == train::WordTokenizer::kKind;
  const std::string what = std::to_string(unknown.size()) + (words ? " word" : " character") +
                           (unknown.size() == 1 ? "" : "s") + " that the checkpoint's " + tokenizer.name() +
                           " tokenizer cannot encode: " + list_pieces(prompt, unknown);
  const bool one = unknown.size() == 1;
  LINEA_CHECK(drop_unknown, "generate", "the prompt holds ", what, ". The model would see <unk> in ",
              one ? "its" : "their", " place; change the prompt",
              words ? " (write <unk> where an unknown word is meant)" : "", ", or pass --drop-unknown to go on without ",
              one ? "it" : "them");
  std::fprintf(stderr, "linea generate: warning: dropped from the prompt %s\n", what.c_str());
  return without(prompt, unknown);
}

int run(const std::string& program, std::span<const std::string> args) {
  std::string checkpoint, prompt = "\n", device = "cpu";
  bool drop_unknown = false;
  train::SampleOptions o;
  o.temperature = 0.8;
  o.top_p = 0.95;
  Flags flags(program, "Generates text from a checkpoint, printing the prompt and its continuation.");
  flags.add("checkpoint", &checkpoint, "run directory (its latest checkpoint) or one checkpoint directory");
  flags.add("prompt", &prompt, "text to continue; text the tokenizer cannot encode is an error");
  flags.add("drop-unknown", &drop_unknown,
            "leave out of the prompt what the tokenizer cannot encode (with a warning naming it) instead of failing");
  flags.add("tokens", &o.tokens, "new tokens to generate");
  flags.add("temperature", &o.temperature, "0: greedy; higher: more random");
  flags.add("top-k", &o.top_k, "sample among the k most likely tokens; 0: all");
  flags.add("top-p", &o.top_p, "sample from the smallest set of tokens whose probability reaches p");
  flags.add("seed", &o.seed, "seed of the sampling");
  flags.add("device", &device, "cpu, cuda or cuda:N");
  if (!flags.parse(args)) return 0;
  if (checkpoint.empty()) flags.fail("--checkpoint is required");

  const Device dev = Device::parse(device);
  train::SavedModel saved = train::load_saved_model(checkpoint, dev);
  const std::vector<int64_t> prompt_ids = saved.tokenizer->encode(checked_prompt(prompt, *saved.tokenizer, drop_unknown));
  LINEA_CHECK(!prompt_ids.empty(), "generate", "the prompt encodes to no tokens; give a non-empty --prompt");
  const std::vector<int64_t> ids = train::generate(*saved.model, prompt_ids, o, dev);
  std::printf("%s%s\n", saved.tokenizer->decode(prompt_ids).c_str(), saved.tokenizer->decode(ids).c_str());
  return 0;
}

}  // namespace

Command generate_command() { return {"generate", "generate text from a checkpoint", run}; }

}  // namespace linea::cli
