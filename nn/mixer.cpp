#include "nn/mixer.h"

namespace linea::nn {

void check_sequence_input(const Tensor& x, int64_t expected_dim, const char* layer) {
  LINEA_CHECK(x.defined() && x.dim() == 3 && x.size(2) == expected_dim, layer, "expects input (batch, time, ",
              expected_dim, "), got ", x.describe());
}

void check_step_input(const Tensor& x, int64_t expected_dim, const char* layer) {
  LINEA_CHECK(x.defined() && x.dim() == 2 && x.size(1) == expected_dim, layer, "step expects input (batch, ",
              expected_dim, "), got ", x.describe());
}

}  // namespace linea::nn
