#include "train/evaluate.h"

#include <cmath>

#include "train/batcher.h"

namespace linea::train {

EvalResult evaluate(nn::LanguageModel& model, std::span<const int64_t> tokens, int64_t batch, int64_t seq,
                    Device device, int64_t max_batches, const std::function<bool()>& stop_requested) {
  LINEA_CHECK(tokens.size() >= 2, "evaluate", "the split has ", tokens.size(),
              " tokens; at least 2 are needed to predict one");
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  const EvalBatches batches(tokens, batch, seq);
  const int64_t count = max_batches > 0 ? std::min<int64_t>(max_batches, batches.size()) : batches.size();
  double total = 0.0;
  int64_t targets = 0;
  EvalResult r;
  for (int64_t i = 0; i < count; ++i) {
    if (stop_requested && stop_requested()) {
      r.stopped = true;
      break;
    }
    const Batch b = batches[i];
    const Tensor logits = model.forward(to(b.inputs, device));
    total += cross_entropy(logits, to(b.targets, device), -100, Reduction::Sum).item();
    targets += b.targets.numel();
  }
  model.train(was_training);
  r.tokens = targets;
  r.loss = targets > 0 ? total / static_cast<double>(targets) : 0.0;
  r.ppl = std::exp(r.loss);
  return r;
}

}  // namespace linea::train
