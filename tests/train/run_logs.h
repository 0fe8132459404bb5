#pragma once
// What the trainer tests share: a seeded corpus to train on, a tiny run's options, and the
// losses a run logged.
#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nn/json.h"
#include "tensor/creation.h"
#include "tensor/random.h"
#include "tests/train/temp_dir.h"
#include "train/file_io.h"
#include "train/train_options.h"

namespace linea::testing {

// A few thousand characters of pseudo-English from a seeded generator.
inline std::string generated_text(uint64_t seed) {
  const char* words[] = {"the", "model", "learns", "a", "small", "corpus", "of", "words", "and", "gates",
                         "decay", "slowly", "while", "keys", "meet", "queries", "in", "linear", "time"};
  Generator gen(seed);
  const std::vector<int64_t> picks = randint(0, 19, {1500}, kCPU, &gen).to_vector<int64_t>();
  std::string text;
  for (size_t i = 0; i < picks.size(); ++i) text += std::string(words[picks[i]]) + (i % 11 == 10 ? ".\n" : " ");
  return text;
}

// A run small enough for a test: an RS model of width 16 on dir's corpus.txt, 12 steps of 4
// sequences of 16 tokens, evaluated every 4 steps, saved every 6, written to dir / run.
inline train::TrainOptions tiny_train_options(const TempDir& dir, const std::string& run) {
  train::TrainOptions o;
  o.data = dir / "corpus.txt";
  o.cache_dir = "none";
  o.model = "RS";
  o.d_model = 16;
  o.heads = 2;
  o.steps = 12;
  o.batch = 4;
  o.seq = 16;
  o.warmup = 2;
  o.eval_every = 4;
  o.eval_batches = 2;
  o.save_every = 6;
  o.sample_tokens = 8;
  o.out = dir / run;
  return o;
}

// A stream for the progress a test does not read.
inline std::FILE* quiet() { return std::fopen("/dev/null", "w"); }

// The loss of every record of `kind` ("step", or "eval") in a run's log.jsonl, by step. JSON's
// numbers round-trip, so two runs' maps are equal exactly when their logs' losses are.
inline std::map<int64_t, double> logged_losses(const std::string& run_dir, const std::string& kind = "step") {
  std::map<int64_t, double> losses;
  std::istringstream in(train::read_file(run_dir + "/log.jsonl", "log"));
  std::string line;
  while (std::getline(in, line)) {
    const json::Value r = json::parse(line);
    if (json::get<std::string>(r, "kind") == kind) losses[json::get<int64_t>(r, "step")] = json::get<double>(r, "loss");
  }
  return losses;
}

}  // namespace linea::testing
