#pragma once
// AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization"): Adam whose weight decay
// shrinks the weights directly instead of being added to the gradient, so the decay is not
// rescaled by the adaptive denominator. For a parameter p with gradient g, at its t-th update:
//
//   m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g^2
//   m_hat = m / (1 - beta1^t)                 v_hat = v / (1 - beta2^t)
//   p -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p)
//
// The decay term applies only to parameters whose weight_decay flag is set (nn::Module clears it
// for norms, biases and embeddings).
#include "train/optimizer.h"

namespace linea::train {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

class AdamW : public Optimizer {
 public:
  explicit AdamW(std::vector<NamedParameter> params, AdamWOptions options = {});
  const AdamWOptions& options() const { return options_; }

 protected:
  void update(Slot& slot, const Tensor& grad) override;

 private:
  AdamWOptions options_;
};

}  // namespace linea::train
