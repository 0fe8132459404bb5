// `linea linearize`: a trained softmax run turned into a linear or gated model, by copying its
// weights, attention transfer and fine-tuning (train/linearize.h; docs/linearize.md). The
// trained run's options (data, batch, seq, lr, ...) are the defaults of every training flag.
#include <cstdio>
#include <string>

#include "tools/commands.h"
#include "tools/flags.h"
#include "tools/stop_signals.h"
#include "tools/train_flags.h"
#include "train/json_file.h"
#include "train/linearize.h"

namespace linea::cli {

namespace {

constexpr const char* kDescription =
    "Turns a trained softmax model (a `linea train` run) into a linear or gated one whose pattern\n"
    "differs only in which layers are softmax (S) and which are a linear-attention letter\n"
    "(L, H, A, F, G, R, D), e.g. SSSS -> RRRR, or SRSR for a hybrid. Three steps:\n"
    "  copy     every weight that carries over is copied: embeddings, norms, MLPs, the unchanged\n"
    "           layers, and each replaced layer's q/k/v/o projections (o_proj -> out_proj); the new\n"
    "           layers' own parameters (feature maps, gates, output norms) start from their init.\n"
    "  stage 1  --transfer-steps N: attention transfer. The trained model is a frozen teacher; each\n"
    "           new layer runs on the teacher's hidden state and is trained, alone, to give the\n"
    "           softmax layer's output (loss: the sum over replaced layers of the mean squared\n"
    "           error). Only the new layers' own parameters train (--transfer-qkvo: also their\n"
    "           q/k/v/o). The validation MSE per layer is printed before and after.\n"
    "           Checkpoints and log: OUT/transfer/.\n"
    "  stage 2  --steps N: fine-tuning, an ordinary training run in OUT: every parameter, or with\n"
    "           --lora-rank r only LoRA adapters on --lora-targets, merged into the weights at the\n"
    "           end (--merge-lora). `linea eval`, `generate` and `train --resume` then work on OUT.\n"
    "Training flags default to the trained run's options. Ctrl-C saves a checkpoint of the stage\n"
    "in progress; --resume --out OUT continues it exactly.";

// With --resume the saved options stand; flags may change only how long and how it reports.
train::LinearizeOptions resumed_options(const std::string& out, const Flags& flags, const train::TrainOptions& given) {
  train::LinearizeOptions saved =
      train::LinearizeOptions::from_json(train::read_json_file(train::linearize_options_path(out), "linearize options"));
  for (const char* fixed : {"checkpoint", "model", "layer-options", "transfer-steps", "transfer-lr", "transfer-qkvo"})
    if (flags.was_set(fixed)) flags.fail(std::string("--") + fixed + " cannot change on --resume (see " +
                                         train::linearize_options_path(out) + ")");
  const json::Value now = given.to_json(), before = saved.train.to_json();
  for (const auto& [key, value] : now.items()) {
    const std::string flag = to_flag_name(key);
    if (!flags.has(flag) || !flags.was_set(flag) || key == "resume" || key == "out") continue;
    if (!train::may_change_on_resume(key) && value != json::at(before, key))
      flags.fail("--" + flag + " cannot change on --resume (the run has " + json::dump(json::at(before, key)) + ")");
    json::Value one = json::Value::object();
    one[key] = value;
    saved.train.update_from_json(one);
  }
  return saved;
}

// The trained run's per-letter options with the given ones added (a letter given replaces its own).
std::string merged_layer_options(const std::string& base, const std::string& added, const Flags& flags) {
  json::Value merged = json::parse(base), extra;
  try {
    extra = json::parse(added);
  } catch (const Error& e) {
    flags.fail(std::string("--layer-options is not valid JSON: ") + e.what());
  }
  if (!extra.is_object()) flags.fail("--layer-options must be a JSON object of per-letter options");
  for (const auto& [letter, options] : extra.items()) merged[letter] = options;
  return json::dump(merged);
}

void print_mse(const char* when, const train::TransferReport& r, const std::vector<double>& mse) {
  std::printf("  %-6s", when);
  for (size_t i = 0; i < r.layers.size() && i < mse.size(); ++i)
    std::printf("  layer %lld: %.5g", static_cast<long long>(r.layers[i]), mse[i]);
  std::printf("\n");
}

int run(const std::string& program, std::span<const std::string> args) {
  train::LinearizeOptions options;
  train::TrainOptions given;
  Flags flags(program, kDescription);
  flags.add("checkpoint", &options.checkpoint, "the trained run (its latest checkpoint) or one checkpoint directory");
  flags.add("model", &given.model, "the new layer pattern: the trained one with S layers turned into linear letters");
  flags.add("layer-options", &given.layer_options,
            "JSON options of the new letters, added to the trained run's, e.g. '{\"R\": {\"feature_map\": \"relu\"}}'");
  flags.add("transfer-steps", &options.transfer_steps, "stage 1: attention-transfer steps; 0: no stage 1");
  flags.add("transfer-lr", &options.transfer_lr, "stage 1: peak learning rate (cosine to a tenth, no warmup)");
  flags.add("transfer-qkvo", &options.transfer_qkvo, "stage 1: also train the replaced layers' copied q/k/v/o");
  add_data_flags(flags, given);
  add_training_flags(flags, given);
  if (!flags.parse(args)) return 0;
  if (!flags.was_set("out")) flags.fail("--out is required: the run directory to write");

  if (given.resume) {
    options = resumed_options(given.out, flags, given);
    options.train.out = given.out;
  } else {
    if (options.checkpoint.empty()) flags.fail("--checkpoint is required: the trained softmax run");
    if (!flags.was_set("model")) flags.fail("--model is required: the new layer pattern, e.g. RRRR");
    const train::SourceRun source = train::load_source_run(options.checkpoint);
    options.train = train::linearized_train_options(source, given.model, given.out);
    const std::string trained_layer_options = options.train.layer_options;
    apply_given_flags(flags, given, options.train);
    options.train.layer_options = merged_layer_options(trained_layer_options, given.layer_options, flags);
  }

  int signal = 0;
  const train::LinearizeResult r = run_stoppable(
      [&](const auto& should_stop) { return train::linearize(options, given.resume, stdout, should_stop); }, signal);
  if (r.stopped) {
    std::fflush(stdout);
    std::fprintf(stderr, "\nlinea linearize: stopped by %s during %s; resume with:\n  %s linearize --resume --out %s\n",
                 signal_name(signal).c_str(), r.stage == "transfer" ? "attention transfer" : "fine-tuning",
                 shell_quote(program_invocation_name).c_str(), shell_quote(options.train.out).c_str());
    return signal != 0 ? exit_status_for_signal(signal) : kExitFailure;
  }
  if (!r.transfer.layers.empty()) {
    std::printf("\nattention transfer, %lld steps: validation MSE per replaced layer\n",
                static_cast<long long>(r.transfer.steps));
    print_mse("before", r.transfer, r.transfer.mse_before);
    print_mse("after", r.transfer, r.transfer.mse_after);
  }
  std::printf("\nfine-tuned %lld steps of a %lld-parameter model in %.1f s; checkpoint %s\n",
              static_cast<long long>(r.train.steps), static_cast<long long>(r.train.parameters), r.train.seconds,
              r.train.checkpoint.c_str());
  if (!r.train.sample.empty()) std::printf("\nsample:\n%s\n\n", r.train.sample.c_str());
  std::printf("test loss %.4f ppl %.3f\n", r.train.test_loss, r.train.test_ppl);
  std::printf("valid loss %.4f ppl %.3f\n", r.train.valid_loss, r.train.valid_ppl);
  return 0;
}

}  // namespace

Command linearize_command() {
  return {"linearize", "turn a trained softmax model into a linear or gated one (transfer, LoRA)", run};
}

}  // namespace linea::cli
