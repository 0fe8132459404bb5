#pragma once
// Prompts a tokenizer cannot fully encode, for `linea generate` and the sample `linea train`
// draws. A tokenizer turns what it cannot represent (a character a char tokenizer never saw in
// training, a word outside a word vocabulary) into <unk>, so the continuation would follow from a
// prompt the user did not write. Such a prompt is refused with an error naming those pieces, or,
// when the user asks (--drop-unknown), goes on without them, with a warning naming them.
#include <string>

#include "train/tokenizer.h"

namespace linea::train {

// Whose prompt it is, for the messages.
struct PromptUse {
  const char* command;    // the op of the error: "generate", "train"
  const char* tokenizer;  // whose tokenizer: "the checkpoint's", "the run's"
  std::string prompt = "the prompt";  // which one: "line 3 of the prompts file 'p.txt'"
};

struct CheckedPrompt {
  std::string text;     // the prompt the model will see
  std::string dropped;  // with drop_unknown, what was left out ("3 characters that ..."); else empty
};

// The prompt itself when the tokenizer encodes all of it. Otherwise an Error naming what it
// cannot encode (the first five pieces, each with its position in characters) and suggesting
// --drop-unknown; with drop_unknown, the prompt without those pieces and a description of them.
CheckedPrompt check_prompt(const std::string& prompt, const Tokenizer& tokenizer, bool drop_unknown,
                           const PromptUse& use);

}  // namespace linea::train
