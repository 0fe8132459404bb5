#include "train/prompt.h"

#include <cstdio>
#include <string_view>
#include <vector>

#include "train/utf8.h"
#include "train/word_tokenizer.h"

namespace linea::train {

namespace {

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
std::string list_pieces(std::string_view text, const std::vector<Unencodable>& pieces) {
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
std::string without(std::string_view text, const std::vector<Unencodable>& pieces) {
  std::string kept;
  size_t pos = 0;
  for (const Unencodable& piece : pieces) {
    kept += text.substr(pos, piece.offset - pos);
    pos = piece.offset + piece.size;
  }
  return kept += text.substr(pos);
}

}  // namespace

CheckedPrompt check_prompt(const std::string& prompt, const Tokenizer& tokenizer, bool drop_unknown,
                           const PromptUse& use) {
  const std::vector<Unencodable> unknown = tokenizer.unencodable(prompt);
  if (unknown.empty()) return {prompt, ""};
  const bool words = tokenizer.name() == WordTokenizer::kKind;
  const std::string what = std::to_string(unknown.size()) + (words ? " word" : " character") +
                           (unknown.size() == 1 ? "" : "s") + " that " + use.tokenizer + " " + tokenizer.name() +
                           " tokenizer cannot encode: " + list_pieces(prompt, unknown);
  const bool one = unknown.size() == 1;
  LINEA_CHECK(drop_unknown, use.command, use.prompt, " holds ", what, ". The model would see <unk> in ",
              one ? "its" : "their", " place; change the prompt",
              words ? " (write <unk> where an unknown word is meant)" : "", ", or pass --drop-unknown to go on without ",
              one ? "it" : "them");
  return {without(prompt, unknown), what};
}

}  // namespace linea::train
