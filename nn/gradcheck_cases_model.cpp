// The whole language model's loss, checked w.r.t. every parameter on a tiny configuration, once
// per layer letter: embedding, blocks, norms, tied head and cross-entropy in one row.
#include "nn/gradcheck_cases.h"
#include "nn/gradcheck_module.h"
#include "nn/model.h"

namespace linea::nn {

namespace {
ModelConfig tiny_config(char letter) {
  ModelConfig c;
  c.vocab_size = 7;
  c.d_model = 8;
  c.heads = 2;
  c.pattern = std::string(1, letter);
  c.mlp_hidden = 8;
  return c;
}
}  // namespace

void add_model_cases(std::vector<gradcheck::Case>& cases) {
  for (const LayerKind& kind : layer_kinds()) {
    const ModelConfig config = tiny_config(kind.letter);
    cases.push_back(module_case(
        "LanguageModel/" + std::string(1, kind.letter) + "_" + kind.name,
        [config](Generator& gen) { return std::make_shared<LanguageModel>(config, gen); },
        [](Generator&) { return std::vector<Tensor>{}; },
        [](LanguageModel& m, const std::vector<Tensor>&) {
          // Fixed ids and targets (not inputs of the check: they are integers).
          const Tensor ids = from_vector<int64_t>({1, 4, 2, 6, 0, 3, 5, 2, 2, 1}, {2, 5});
          const Tensor targets = from_vector<int64_t>({4, 2, 6, 0, 3, 5, 2, 2, 1, 0}, {2, 5});
          return m.loss(ids, targets);
        }));
  }
}

}  // namespace linea::nn
