#include "nn/layers/check.h"

#include "tensor/error.h"

namespace linea::nn {

void check_last_dim(const Tensor& x, int64_t expected, const char* layer) {
  LINEA_CHECK(x.defined(), layer, "got an undefined input");
  LINEA_CHECK(x.dim() >= 1 && x.size(-1) == expected && is_floating(x.dtype()), layer,
              "expects a floating input (..., ", expected, "), got ", x.describe());
}

void check_positive(int64_t value, const char* what, const char* layer) {
  LINEA_CHECK(value > 0, layer, what, " must be positive, got ", value);
}

}  // namespace linea::nn
