// `linea train`: flags map one to one onto train::TrainOptions (train/train_options.h); a JSON
// config file (--config) uses the same names with underscores, and flags given on the command
// line override it.
//
// Ctrl-C (SIGINT) or SIGTERM during training stops the run at a checkpoint instead of losing the
// steps since the last save: tools/stop_signals.h turns the signal into a flag that train_model
// polls between steps, train_model writes the checkpoint, and this command prints how to resume
// and exits with 128 + the signal's number (130, 143), the shell's convention.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "nn/model.h"
#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/scale_out.h"
#include "tools/stop_signals.h"
#include "tools/train_flags.h"
#include "train/checkpoint.h"
#include "train/json_file.h"
#include "train/trainer.h"

namespace linea::cli {

namespace {

// The words of a JSON config file as if they had been typed before the real flags, so that the
// flag parser checks their types and the real flags, coming later, win.
std::vector<std::string> config_file_words(const std::string& path) {
  const json::Value config = train::read_json_file(path, "config file");
  LINEA_CHECK(config.is_object(), "train", "the config file '", path, "' must hold a JSON object");
  std::vector<std::string> words;
  for (const auto& [key, value] : config.items()) {
    const std::string flag = "--" + to_flag_name(key);
    if (value.is_boolean()) words.push_back(value.get<bool>() ? flag : "--no-" + to_flag_name(key));
    else if (value.is_string()) words.insert(words.end(), {flag, value.get<std::string>()});
    else words.insert(words.end(), {flag, json::dump(value)});  // numbers, and layer_options' object
  }
  return words;
}

// Pulls --config FILE out of args (either spelling), returning the remaining words.
std::vector<std::string> expand_config(std::span<const std::string> args) {
  std::vector<std::string> rest, config;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) config = config_file_words(args[++i]);
    else if (args[i].rfind("--config=", 0) == 0) config = config_file_words(args[i].substr(9));
    else rest.push_back(args[i]);
  }
  config.insert(config.end(), rest.begin(), rest.end());
  return config;
}

void bind_flags(Flags& f, train::TrainOptions& o, ScaleOut& scale, std::string* config_placeholder,
                bool* help_layers) {
  f.add("config", config_placeholder, "JSON file of options (keys as below, with underscores); flags override it");
  add_data_flags(f, o);
  f.add_choice("tokenizer", &o.tokenizer, {"byte", "char", "word", "bpe"}, "tokenizer built from the train split");
  f.add("vocab-size", &o.vocab_size, "target vocabulary of --tokenizer bpe");
  f.add("tokenizer-file", &o.tokenizer_file, "a tokenizer saved by `linea tokenizer train` (overrides --tokenizer)");
  f.add("model", &o.model, "layer pattern, one letter per layer (see --help-layers), e.g. RRRR or SRSR");
  f.add("layers", &o.layers, "with a one-letter --model: the number of layers");
  f.add("d-model", &o.d_model, "model width");
  f.add("heads", &o.heads, "attention heads");
  f.add_choice("mlp", &o.mlp, {"gelu", "gelu_tanh", "geglu", "swiglu"}, "feed-forward block");
  f.add("mlp-hidden", &o.mlp_hidden, "hidden width of the feed-forward block; 0: 4 d (gelu) or 8/3 d (gated kinds)");
  f.add_choice("norm", &o.norm, {"rms", "layer"}, "normalization of the blocks");
  f.add("tie-embeddings", &o.tie_embeddings, "share the embedding with the output head");
  f.add("dropout", &o.dropout, "residual dropout");
  f.add("layer-options", &o.layer_options, "JSON per-letter layer options, e.g. '{\"R\": {\"feature_map\": \"relu\"}}'");
  add_training_flags(f, o);
  add_scale_out_flags(f, scale);
  f.add("help-layers", help_layers, "list the layer letters of --model and exit");
}

void print_layer_letters() {
  std::printf("Layer letters of --model (one per layer; options per letter go in --layer-options):\n");
  for (const nn::LayerKind& kind : nn::layer_kinds())
    std::printf("  %c  %-11s %s\n", kind.letter, kind.name.c_str(), kind.description.c_str());
  std::printf("Per-letter options are listed in docs/layers.md.\n");
}

// With --resume, the run's saved options are the base: the flags given now may only change how
// long it runs and how it reports.
train::TrainOptions resumed_options(const train::TrainOptions& given, const Flags& flags) {
  const std::optional<std::string> latest = train::latest_checkpoint(given.out);
  if (!latest) return given;  // train_model reports the missing checkpoint
  const train::Checkpoint ck = train::load_checkpoint(*latest);
  train::TrainOptions saved;
  saved.update_from_json(json::at(ck.trainer.extra, "options", *latest + "/trainer.json extra"));
  const json::Value now = given.to_json(), before = saved.to_json();
  for (const auto& [key, value] : now.items()) {
    if (!flags.was_set(to_flag_name(key))) continue;
    if (train::may_change_on_resume(key)) {
      json::Value one = json::Value::object();
      one[key] = value;
      saved.update_from_json(one);
    }
    else if (value != json::at(before, key))
      flags.fail("--" + to_flag_name(key) + " cannot change on --resume (the run has " + json::dump(json::at(before, key)) + ")");
  }
  saved.resume = true;
  saved.out = given.out;
  return saved;
}

// The command that continues a stopped run: --resume takes every option from the checkpoint, so
// --out is all it needs (and, for a data-parallel run, where to run it). The program is named as
// the user started it (argv[0], which glibc keeps in program_invocation_name):
// "./build/tools/linea" stays that and "linea" found on the PATH stays "linea", so the line can
// be pasted as it is, from the same directory.
std::string resume_command(const std::string& out, const std::optional<tools::RankEnvironment>& ranks) {
  std::string command = shell_quote(program_invocation_name) + " train --resume --out " + shell_quote(out);
  if (!ranks) return command;
  command += " --gpus " + std::to_string(ranks->local_world_size);
  // Across hosts each needs its own --node-rank: a shell comment says so and keeps the line pasteable.
  if (ranks->world_size > ranks->local_world_size)
    command += " --nnodes " + std::to_string(ranks->world_size / ranks->local_world_size) + " --master " +
               ranks->master + "  # on every host, each with its --node-rank";
  return command;
}

// An error in one rank of a data-parallel run, with the rank named: the launcher's terminal shows
// every rank's output.
[[noreturn]] void fail_as_rank(const tools::RankEnvironment& env, const std::exception& e) {
  fail("train", "rank ", env.rank, " of ", env.world_size, ": ", e.what());
}

// Trains in this process, alone or as one rank of a data-parallel run (tools/scale_out.h).
// A rank that fails tells the others why before the error leaves it.
train::TrainResult train_here(const train::TrainOptions& options, dist::Communicator* comm,
                              const std::optional<tools::RankEnvironment>& rank_env, int& signal) {
  try {
    train::TrainResult r = run_stoppable(
        [&](const auto& should_stop) { return train::train_model(options, stdout, should_stop, {}, comm); },
        signal);
    if (comm) comm->close();
    return r;
  } catch (const std::exception& e) {
    if (!comm) throw;
    comm->report_failure(e.what());
    fail_as_rank(*rank_env, e);
  }
}

int run(const std::string& program, std::span<const std::string> raw_args) {
  train::TrainOptions options;
  ScaleOut scale;
  std::string config_placeholder;
  bool help_layers = false;
  Flags flags(program,
              "Trains a language model and reports validation and test perplexity and a sample.\n"
              "With no flags: a small ReGLA model on the fortunes corpus, on the CPU, in a few minutes.\n"
              "Ctrl-C (or SIGTERM) finishes the current step, saves a checkpoint and prints the command\n"
              "that resumes the run; the exit status is then 130 (143 for SIGTERM).");
  bind_flags(flags, options, scale, &config_placeholder, &help_layers);
  const std::vector<std::string> args = expand_config(raw_args);
  if (!flags.parse(args)) return 0;
  if (help_layers) {
    print_layer_letters();
    return 0;
  }
  if (should_launch(scale, flags)) return launch_local_ranks(scale, {"train"}, raw_args);
  if (options.resume) options = resumed_options(options, flags);
  const std::optional<tools::RankEnvironment> rank_env = tools::rank_environment();
  std::unique_ptr<dist::Communicator> comm;
  if (rank_env) {
    if (flags.was_set("device") && options.device.rfind("cuda", 0) != 0)
      flags.fail("--gpus trains on GPUs; --device " + options.device + " contradicts it");
    options.device = "cuda";
    try {
      comm = join_run(*rank_env, scale);
    } catch (const std::exception& e) {
      fail_as_rank(*rank_env, e);
    }
  }
  // Armed at the training loop's first poll, which comes when the corpus and model are ready: a
  // signal before quits as it always did.
  int signal = 0;
  const train::TrainResult r = train_here(options, comm.get(), rank_env, signal);
  if (rank_env && rank_env->rank != 0) return r.stopped && signal != 0 ? exit_status_for_signal(signal) : 0;
  if (r.stopped) {
    std::fflush(stdout);
    std::fprintf(stderr, "\nlinea train: stopped by %s after step %lld of %lld; checkpoint %s\nresume with:\n  %s\n",
                 signal_name(signal).c_str(), static_cast<long long>(r.steps), static_cast<long long>(options.steps),
                 r.checkpoint.c_str(), resume_command(options.out, rank_env).c_str());
    return signal != 0 ? exit_status_for_signal(signal) : kExitFailure;
  }
  std::printf("\ntrained %lld steps of a %lld-parameter model in %.1f s (%.0f tokens/s); checkpoint %s\n",
              static_cast<long long>(r.steps), static_cast<long long>(r.parameters), r.seconds, r.tokens_per_s,
              r.checkpoint.c_str());
  if (!r.sample.empty()) std::printf("\nsample:\n%s\n\n", r.sample.c_str());
  std::printf("test loss %.4f ppl %.3f\n", r.test_loss, r.test_ppl);
  std::printf("valid loss %.4f ppl %.3f\n", r.valid_loss, r.valid_ppl);
  return 0;
}

}  // namespace

Command train_command() { return {"train", "train a language model (default: ReGLA on the fortunes corpus)", run}; }

}  // namespace linea::cli
