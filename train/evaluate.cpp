#include "train/evaluate.h"

#include <cmath>

#include "train/batcher.h"

namespace linea::train {

EvalResult evaluate(nn::LanguageModel& model, std::span<const int64_t> tokens, int64_t batch, int64_t seq,
                    Device device, int64_t max_batches, const std::function<bool()>& stop_requested,
                    dist::Communicator* comm) {
  LINEA_CHECK(tokens.size() >= 2, "evaluate", "the split has ", tokens.size(),
              " tokens; at least 2 are needed to predict one");
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  const EvalBatches batches(tokens, batch, seq);
  // N ranks of `batch` rows each take max_batches batches apiece: the windows one process of
  // N * batch rows would take in max_batches batches.
  const int64_t first = comm ? comm->rank() : 0, stride = comm ? comm->size() : 1;
  const int64_t count = max_batches > 0 ? std::min<int64_t>(max_batches * stride, batches.size()) : batches.size();
  double total = 0.0;
  int64_t targets = 0;
  EvalResult r;
  for (int64_t i = first; i < count; i += stride) {
    if (!comm && stop_requested && stop_requested()) {
      r.stopped = true;
      break;
    }
    const Batch b = batches[i];
    const Tensor logits = model.forward(to(b.inputs, device));
    total += cross_entropy(logits, to(b.targets, device), -100, Reduction::Sum).item();
    targets += b.targets.numel();
  }
  model.train(was_training);
  if (comm) {
    const std::vector<double> sums = dist::all_reduce_sum(*comm, {total, static_cast<double>(targets)});
    total = sums[0];
    targets = static_cast<int64_t>(sums[1]);
  }
  r.tokens = targets;
  r.loss = targets > 0 ? total / static_cast<double>(targets) : 0.0;
  r.ppl = std::exp(r.loss);
  return r;
}

}  // namespace linea::train
