// `linea generate`: text from a checkpoint. Linear and gated layers decode from their recurrent
// state (constant work per token), softmax layers from a KV cache.
//
// A prompt the checkpoint's tokenizer cannot fully encode is refused, naming what it cannot
// encode; --drop-unknown leaves those pieces out instead, with a warning (train/prompt.h).
#include <cstdio>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/flags.h"
#include "train/generate.h"
#include "train/prompt.h"
#include "train/saved_model.h"

namespace linea::cli {

namespace {

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
  const train::CheckedPrompt checked =
      train::check_prompt(prompt, *saved.tokenizer, drop_unknown, {"generate", "the checkpoint's"});
  if (!checked.dropped.empty())
    std::fprintf(stderr, "linea generate: warning: dropped from the prompt %s\n", checked.dropped.c_str());
  const std::vector<int64_t> prompt_ids = saved.tokenizer->encode(checked.text);
  LINEA_CHECK(!prompt_ids.empty(), "generate", "the prompt encodes to no tokens; give a non-empty --prompt");
  const std::vector<int64_t> ids = train::generate(*saved.model, prompt_ids, o, dev);
  std::printf("%s%s\n", saved.tokenizer->decode(prompt_ids).c_str(), saved.tokenizer->decode(ids).c_str());
  return 0;
}

}  // namespace

Command generate_command() { return {"generate", "generate text from a checkpoint", run}; }

}  // namespace linea::cli
