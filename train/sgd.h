#pragma once
// Stochastic gradient descent with optional momentum (heavy ball, or Nesterov's look-ahead) and
// weight decay, following PyTorch's torch.optim.SGD (without dampening):
//
//   d = g + weight_decay * p                  (only for parameters whose weight_decay flag is set)
//   b = momentum * b + d                      (b starts at zero, so the first b is d)
//   d = nesterov ? d + momentum * b : b       (when momentum > 0)
//   p -= lr * d
//
// Unlike AdamW's, this decay is the classic L2 penalty: it enters through the gradient.
#include "train/optimizer.h"

namespace linea::train {

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
};

class SGD : public OptimizerWith<SGDOptions> {
 public:
  explicit SGD(std::vector<NamedParameter> params, SGDOptions options = {});  // nesterov needs momentum > 0

 protected:
  void update(Slot& slot, const Tensor& grad, double grad_scale) override;
};

}  // namespace linea::train
