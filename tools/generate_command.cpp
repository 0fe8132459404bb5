// `linea generate`: text from a checkpoint. The prompt goes through the model in one parallel pass
// (train/generate.h); then linear and gated layers decode from their recurrent state (constant
// work per token), softmax layers from a KV cache.
//
// One sequence streams to stdout: the prompt, then each token's text as it is drawn. Several
// (--num-samples N, or --prompts FILE with one prompt per line) generate as one batch and print
// when done, each under a header line naming its prompt, sample and seed:
//   --- prompt 2/3, sample 1/4, seed 0 ---
// Sample i (from 0) is drawn with seed + i, so it is what `--seed <seed + i>` gives alone.
//
// A prompt the checkpoint's tokenizer cannot fully encode is refused, naming what it cannot
// encode; --drop-unknown leaves those pieces out instead, with a warning (train/prompt.h).
#include <algorithm>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "nn/precision.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/train_flags.h"
#include "train/file_io.h"
#include "train/generate.h"
#include "train/prompt.h"
#include "train/saved_model.h"

namespace linea::cli {

namespace {

// The prompts of a --prompts file: one per line ('\r' before '\n' dropped, no empty prompt after
// a final newline). An empty file or an empty line is an error naming the file and the line.
std::vector<std::string> read_prompts(const std::string& path) {
  const std::string text = train::read_file(path, "prompts file");
  std::vector<std::string> prompts;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    LINEA_CHECK(!line.empty(), "generate", "line ", prompts.size() + 1, " of the prompts file '", path,
                "' is empty; write one prompt per line");
    prompts.push_back(std::move(line));
    start = end + 1;
  }
  LINEA_CHECK(!prompts.empty(), "generate", "the prompts file '", path, "' holds no prompt; write one per line");
  return prompts;
}

// The text one more token adds to a sequence whose last token is `previous`. Every tokenizer's
// text depends on at most the token before (the word tokenizer puts a space between words, none
// after <eos>), so decode(previous, id) minus decode(previous) is what the token appends, at
// constant cost however long the sequence grows.
std::string appended_text(const train::Tokenizer& tokenizer, int64_t previous, int64_t id) {
  const std::vector<int64_t> pair{previous, id};
  return tokenizer.decode(pair).substr(tokenizer.decode(std::span(pair).first(1)).size());
}

struct Config {
  std::string checkpoint, prompt = "\n", prompts_file, device = "cpu", precision = "fp32";
  int64_t num_samples = 1;
  bool drop_unknown = false;
  train::SampleOptions sample;
};

int run(const std::string& program, std::span<const std::string> args) {
  Config c;
  train::SampleOptions& o = c.sample;
  o.temperature = 0.8;
  o.top_p = 0.95;
  Flags flags(program, "Generates text from a checkpoint, printing the prompt and its continuation.");
  flags.add("checkpoint", &c.checkpoint, "run directory (its latest checkpoint) or one checkpoint directory");
  flags.add("prompt", &c.prompt, "text to continue; text the tokenizer cannot encode is an error");
  flags.add("prompts", &c.prompts_file,
            "a file of prompts, one per line, generated together as one batch (instead of --prompt)");
  flags.add("num-samples", &c.num_samples,
            "samples per prompt, generated as one batch; sample i (from 0) is drawn with seed + i");
  flags.add("tokens", &o.tokens, "new tokens to generate");
  flags.add("max-length", &o.max_length,
            "the most tokens a sequence may hold, prompt and new ones; more is an error (0: no limit)");
  add_sampling_flags(flags, c.drop_unknown, o.temperature, o.top_k, o.top_p);
  flags.add("seed", &o.seed, "seed of the sampling");
  add_device_flags(flags, c.device, c.precision);
  flags.add("graph", &o.graph,
            "on CUDA, replay each decode step as a CUDA graph where the model allows (recurrent layers; "
            "--no-graph: queue every kernel); the tokens are the same");
  if (!flags.parse(args)) return 0;
  if (c.checkpoint.empty()) flags.fail("--checkpoint is required");
  if (c.num_samples < 1) flags.fail("--num-samples must be at least 1, got " + std::to_string(c.num_samples));
  if (o.tokens < 0) flags.fail("--tokens must be >= 0, got " + std::to_string(o.tokens));
  if (o.max_length < 0) flags.fail("--max-length must be >= 0 (0: no limit), got " + std::to_string(o.max_length));
  if (!c.prompts_file.empty() && flags.was_set("prompt")) flags.fail("give --prompt or --prompts, not both");
  const std::vector<std::string> texts =
      c.prompts_file.empty() ? std::vector<std::string>{c.prompt} : read_prompts(c.prompts_file);

  const Device dev = Device::parse(c.device);
  const nn::PrecisionScope precision_scope(nn::parse_precision(c.precision, "generate"));
  train::SavedModel saved = train::load_saved_model(c.checkpoint, dev);
  const train::Tokenizer& tokenizer = *saved.tokenizer;
  // Every prompt checked, under the name the user knows it by, before any work.
  std::vector<std::vector<int64_t>> prompts;
  for (size_t p = 0; p < texts.size(); ++p) {
    const std::string name = c.prompts_file.empty()
                                 ? "the prompt"
                                 : "line " + std::to_string(p + 1) + " of the prompts file '" + c.prompts_file + "'";
    const train::CheckedPrompt checked =
        train::check_prompt(texts[p], tokenizer, c.drop_unknown, {"generate", "the checkpoint's", name});
    if (!checked.dropped.empty())
      std::fprintf(stderr, "linea generate: warning: dropped from %s %s\n", name.c_str(), checked.dropped.c_str());
    prompts.push_back(tokenizer.encode(checked.text));
    train::check_prompt_ids(prompts.back(), o, saved.model->config().vocab_size, name);
  }
  std::vector<train::Request> requests;
  for (const std::vector<int64_t>& prompt : prompts)
    for (int64_t i = 0; i < c.num_samples; ++i) requests.push_back({prompt, o.seed + static_cast<uint64_t>(i)});

  if (requests.size() == 1) {  // streamed: the prompt, then each token as it comes
    std::fputs(tokenizer.decode(prompts[0]).c_str(), stdout);
    std::fflush(stdout);
    int64_t previous = prompts[0].back();
    train::generate(*saved.model, requests, o, dev, [&](size_t, int64_t id) {
      std::fputs(appended_text(tokenizer, previous, id).c_str(), stdout);
      std::fflush(stdout);
      previous = id;
    });
    std::fputs("\n", stdout);
    return 0;
  }
  const std::vector<std::vector<int64_t>> out = train::generate(*saved.model, requests, o, dev);
  for (size_t r = 0; r < requests.size(); ++r) {
    const size_t p = r / static_cast<size_t>(c.num_samples), i = r % static_cast<size_t>(c.num_samples);
    std::vector<int64_t> ids = requests[r].prompt;
    ids.insert(ids.end(), out[r].begin(), out[r].end());
    std::printf("--- prompt %zu/%zu, sample %zu/%lld, seed %llu ---\n%s\n", p + 1, prompts.size(), i + 1,
                static_cast<long long>(c.num_samples), static_cast<unsigned long long>(requests[r].seed),
                tokenizer.decode(ids).c_str());
  }
  return 0;
}

}  // namespace

Command generate_command() { return {"generate", "generate text from a checkpoint", run}; }

}  // namespace linea::cli
