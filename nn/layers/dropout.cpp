#include "nn/layers/dropout.h"

namespace linea::nn {

Dropout::Dropout(double p, std::shared_ptr<Generator> gen) : p_(p), gen_(std::move(gen)) {
  LINEA_CHECK(p >= 0.0 && p < 1.0, "Dropout", "p must be in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x) const { return dropout(x, p_, is_training(), gen_.get()); }

}  // namespace linea::nn
