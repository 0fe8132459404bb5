// `linea generate`: text from a checkpoint. Linear and gated layers decode from their recurrent
// state (constant work per token), softmax layers from a KV cache.
#include <cstdio>

#include "tools/commands.h"
#include "tools/flags.h"
#include "train/generate.h"
#include "train/saved_model.h"

namespace linea::cli {

namespace {

int run(const std::string& program, std::span<const std::string> args) {
  std::string checkpoint, prompt = "\n", device = "cpu";
  train::SampleOptions o;
  o.temperature = 0.8;
  o.top_p = 0.95;
  Flags flags(program, "Generates text from a checkpoint, printing the prompt and its continuation.");
  flags.add("checkpoint", &checkpoint, "run directory (its latest checkpoint) or one checkpoint directory");
  flags.add("prompt", &prompt, "text to continue");
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
  const std::vector<int64_t> prompt_ids = saved.tokenizer->encode(prompt);
  LINEA_CHECK(!prompt_ids.empty(), "generate", "the prompt encodes to no tokens; give a non-empty --prompt");
  const std::vector<int64_t> ids = train::generate(*saved.model, prompt_ids, o, dev);
  std::printf("%s%s\n", saved.tokenizer->decode(prompt_ids).c_str(), saved.tokenizer->decode(ids).c_str());
  return 0;
}

}  // namespace

Command generate_command() { return {"generate", "generate text from a checkpoint", run}; }

}  // namespace linea::cli
