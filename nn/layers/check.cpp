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

int64_t resolved_head_dim(int64_t head_dim, int64_t d_model, int64_t heads, const char* layer) {
  if (head_dim != 0) return head_dim;
  LINEA_CHECK(d_model % heads == 0, layer, "d_model ", d_model, " is not divisible by ", heads,
              " heads (or set head_dim)");
  return d_model / heads;
}

}  // namespace linea::nn
