#include "tools/paper/gate_training.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/linear_attention/linear_attention.h"
#include "tensor/creation.h"
#include "tensor/error.h"
#include "train/corpus.h"
#include "train/saved_model.h"
#include "train/trainer.h"

namespace linea::cli::paper {

namespace {

// The child `path` names below module, e.g. {"blocks", "0", "mixer"}.
nn::Module& child(nn::Module& module, const std::vector<std::string>& path) {
  nn::Module* m = &module;
  for (const std::string& name : path) {
    nn::Module* next = nullptr;
    for (const auto& [child_name, c] : m->named_children())
      if (child_name == name) next = c.get();
    LINEA_CHECK(next, "paper.gates", "the model has no module '", name, "' on the way to blocks.0.mixer.gate");
    m = next;
  }
  return *m;
}

// The gate's activations on ids: the refined gate's F, or the sigmoid gate's g.
std::vector<double> gate_activations(nn::LanguageModel& model, const Tensor& ids, GateUnderStudy gate) {
  NoGradGuard no_grad;
  model.eval();
  const Tensor x = model.mixer_activations(ids, 1).at(0).input;
  auto* layer = dynamic_cast<nn::linear::LinearAttention*>(&child(model, {"blocks", "0", "mixer"}));
  auto* g = dynamic_cast<nn::linear::Gate*>(&child(model, {"blocks", "0", "mixer", "gate"}));
  LINEA_CHECK(layer && g, "paper.gates", "block 0 is not a gated linear attention layer");
  const nn::linear::GateOutput out = g->forward(x);
  const Tensor log_decay = out.gk.defined() ? out.gk : out.gv;
  // GLA's decay is g^(1/tau): tau times its log is log g.
  const double power = gate == GateUnderStudy::Sigmoid ? layer->config().gate.gla_normalizer : 1.0;
  return exp(to(log_decay, kFloat64) * power).to_vector<double>();
}

}  // namespace

const char* gate_under_study_name(GateUnderStudy gate) { return gate == GateUnderStudy::Sigmoid ? "sigmoid" : "refined"; }

std::vector<double> logit_histogram(const std::vector<double>& values, int bins, double limit) {
  std::vector<double> h(bins, 0.0);
  for (double v : values) {
    const double z = std::log(v) - std::log1p(-v);  // +-inf at 0 and 1: the end bins
    const double position = std::clamp((z + limit) / (2 * limit), 0.0, 1.0);
    h[std::clamp(static_cast<int>(position * bins), 0, bins - 1)] += 1;
  }
  for (double& x : h) x /= std::max<double>(1, static_cast<double>(values.size()));
  return h;
}

GateRun train_gate_run(const PaperRun& run, GateUnderStudy gate, double bias) {
  train::TrainOptions o;
  o.data = run.data;
  o.tokenizer = "char";
  o.cache_dir = "none";
  o.model = std::string("R");  // not = "R": GCC 12 warns (-Wrestrict) on that one, wrongly (its bug 105329)
  o.d_model = run.pick<int64_t>(64, 128);
  o.heads = 2;
  o.steps = run.pick<int64_t>(60, 1500);
  o.batch = run.pick<int64_t>(8, 16);
  o.seq = run.pick<int64_t>(64, 128);
  o.warmup = run.pick<int64_t>(10, 100);
  o.eval_every = o.save_every = o.steps;
  o.eval_batches = 2;
  o.sample_tokens = 0;
  o.seed = run.seed;
  o.device = run.device;
  char name[64];
  std::snprintf(name, sizeof name, "%s_bias%+g", gate_under_study_name(gate), bias);
  o.out = (std::filesystem::path(run.out) / "runs" / name).string();
  // The run is this experiment's own scratch (OUT/runs/<gate>_bias<b>): a rerun replaces it
  // rather than resuming it.
  std::filesystem::remove_all(o.out);
  json::Value layer = {{"gate", gate == GateUnderStudy::Sigmoid ? "gla" : "regla"}, {"gate_dim", "key"},
                       {"gate_bias", bias}};
  o.layer_options = json::dump(json::Value{{"R", layer}});

  // The same validation tokens before and after: the corpus read once, its vocabulary handed to
  // the run so the ids mean the same thing to both models.
  const train::Corpus corpus = train::load_corpus({.data = o.data, .tokenizer = o.tokenizer, .log = [](const std::string&) {}});
  const int64_t rows = 4, cols = o.seq;
  LINEA_CHECK(static_cast<int64_t>(corpus.valid.size()) >= rows * cols, "paper.gates", "the validation split has ",
              corpus.valid.size(), " tokens; need ", rows * cols);
  const Tensor ids = from_vector(std::vector<int64_t>(corpus.valid.begin(), corpus.valid.begin() + rows * cols), {rows, cols});

  GateRun result{.gate = gate, .bias = bias};
  train::RunStart start;
  start.tokenizer = corpus.tokenizer;
  start.initialize = [&](nn::LanguageModel& model) {
    result.before = gate_activations(model, ids, gate);
    model.train();
    return json::Value();
  };
  std::FILE* quiet = std::fopen("/dev/null", "w");
  LINEA_CHECK(quiet, "paper.gates", "could not open /dev/null");
  train::TrainResult trained;
  try {
    trained = train::train_model(o, quiet, {}, start);
  } catch (...) {
    std::fclose(quiet);
    throw;
  }
  std::fclose(quiet);
  train::SavedModel saved = train::load_saved_model(trained.checkpoint, kCPU);
  result.after = gate_activations(*saved.model, ids, gate);
  result.valid_loss = trained.valid_loss;
  result.steps = trained.steps;
  return result;
}

}  // namespace linea::cli::paper
