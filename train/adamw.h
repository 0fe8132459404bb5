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
// for norms, biases and embeddings). The decay uses p before this step's Adam move: the kernel
// computes p * (1 - lr * weight_decay) - lr * m_hat / (sqrt(v_hat) + eps).
//
// A step updates all parameters at once through the fused Backend::adamw_step (a few launches on
// a GPU, reading p, g, m and v once), one call per group of parameters that share a device, a
// dtype and an update count (the count differs only for parameters that missed a gradient in
// some step, since each counts its own updates for the bias correction).
#include <vector>

#include "train/optimizer.h"

namespace linea::train {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

class AdamW : public OptimizerWith<AdamWOptions> {
 public:
  explicit AdamW(std::vector<NamedParameter> params, AdamWOptions options = {});  // betas in [0, 1), eps > 0

 protected:
  // Gathers the parameter's update; the last parameter with a gradient in this step runs them all.
  void update(Slot& slot, const Tensor& grad, double grad_scale) override;

 private:
  struct Pending {
    Tensor param, grad, exp_avg, exp_avg_sq;
    bool decay;
    int64_t step;  // this parameter's update count, 1 on its first
  };
  // Runs the gathered updates, grouped by (device, dtype, step), and empties the list.
  void flush(double grad_scale);

  std::vector<Tensor> params_;  // in the order update() sees them, to find a step's last gradient
  std::vector<Pending> pending_;
  const TensorImpl* last_ = nullptr;  // the parameter whose update() ends the current step
};

}  // namespace linea::train
