#include "tools/paper/scoring.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "tensor/creation.h"
#include "tensor/error.h"
#include "tools/paper/lm_runs.h"
#include "train/corpus.h"

namespace linea::cli::paper {

std::vector<int64_t> test_tokens(const PaperRun& run, const train::SavedModel& model) {
  train::CorpusOptions o;
  o.data = table_data(run);
  o.given_tokenizer = model.tokenizer;
  o.log = [](const std::string&) {};
  return train::load_corpus(o).test;
}

std::shared_ptr<nn::LanguageModel> with_layer_option(const train::SavedModel& saved, const std::string& letter,
                                                     const std::string& key, const json::Value& value, Device device) {
  nn::ModelConfig config = nn::ModelConfig::from_json(saved.checkpoint.config);
  config.layers[letter][key] = value;
  Generator gen(0);
  auto model = std::make_shared<nn::LanguageModel>(config, gen);
  // strict: the option must not have changed which parameters there are
  model->load_state_dict(saved.checkpoint.model, /*strict=*/true);
  model->to(device);
  model->eval();
  return model;
}

WindowScores score_parallel_and_decoding(nn::LanguageModel& model, const std::vector<int64_t>& tokens, int64_t batch,
                                         int64_t seq, int64_t windows, Device device) {
  LINEA_CHECK(seq >= 1 && batch >= 1, "paper.scoring", "seq ", seq, " and batch ", batch, " must be positive");
  const int64_t available = (static_cast<int64_t>(tokens.size()) - 1) / seq;
  LINEA_CHECK(available >= 1, "paper.scoring", "the split has ", tokens.size(), " tokens; a window needs ", seq + 1);
  const int64_t count = windows > 0 ? std::min(windows, available) : available;
  NoGradGuard no_grad;
  model.eval();
  WindowScores s;
  double parallel_sum = 0, decode_sum = 0;
  for (int64_t first = 0; first < count; first += batch) {
    const int64_t rows = std::min(batch, count - first);
    std::vector<int64_t> ids, targets;  // (rows, seq) each, row-major
    for (int64_t r = 0; r < rows; ++r) {
      const auto start = tokens.begin() + (first + r) * seq;
      ids.insert(ids.end(), start, start + seq);
      targets.insert(targets.end(), start + 1, start + seq + 1);
    }
    const Tensor x = from_vector(ids, {rows, seq}, device), y = from_vector(targets, {rows, seq}, device);
    const double n = static_cast<double>(rows * seq);
    parallel_sum += model.loss(x, y).item() * n;
    nn::LanguageModel::State state = model.init_state(rows);
    for (int64_t t = 0; t < seq; ++t) {
      const Tensor logits = model.step(contiguous(select(x, 1, t)), state);  // (rows, V)
      decode_sum += cross_entropy(logits, contiguous(select(y, 1, t)), -100, Reduction::Sum).item();
    }
    s.tokens += rows * seq;
  }
  s.parallel_loss = parallel_sum / static_cast<double>(s.tokens);
  s.decode_loss = decode_sum / static_cast<double>(s.tokens);
  return s;
}

}  // namespace linea::cli::paper
