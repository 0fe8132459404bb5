#pragma once
// Dropout: while training, zeroes each element with probability p and scales the survivors by
// 1 / (1 - p), so the expected output equals the input; in eval mode it is the identity.
//   x (...) -> (...)
//
// The masks come from a Generator the layer shares (std::shared_ptr): a model gives all its
// dropout layers one generator seeded from the run's seed, so training is reproducible and a
// checkpoint restores the masks' stream by saving one offset. Without one, default_generator().
#include <memory>

#include "nn/module.h"

namespace linea::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p, std::shared_ptr<Generator> gen = nullptr);

  Tensor forward(const Tensor& x) const;

  double p() const { return p_; }
  Generator* generator() const { return gen_.get(); }

 private:
  double p_;
  std::shared_ptr<Generator> gen_;
};

}  // namespace linea::nn
