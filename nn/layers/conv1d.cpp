#include "nn/layers/conv1d.h"

#include "nn/init.h"
#include "nn/layers/check.h"
#include "nn/mixer.h"

namespace linea::nn {

CausalConv1D::CausalConv1D(int64_t channels, Generator& gen, int64_t width) {
  check_positive(channels, "channels", "CausalConv1D");
  check_positive(width, "width", "CausalConv1D");
  weight = empty({channels, width});
  init::lecun_normal_(weight, gen);  // fan_in of a (C, width) tensor is width
  bias = zeros({channels});
  register_parameter("weight", &weight);
  register_parameter("bias", &bias, /*weight_decay=*/false);
}

Tensor CausalConv1D::init_state(int64_t batch) const {
  LINEA_CHECK(batch >= 0, "CausalConv1D", "batch must be non-negative, got ", batch);
  return zeros({batch, width() - 1, channels()}, {weight.dtype(), weight.device()});
}

Tensor CausalConv1D::forward(const Tensor& x, const Tensor& initial_state, Tensor* final_state) const {
  check_sequence_input(x, channels(), "CausalConv1D");
  const int64_t batch = x.size(0), length = x.size(1), history = width() - 1;
  const Tensor past = initial_state.defined() ? initial_state : init_state(batch);
  LINEA_CHECK(past.shape() == Shape({batch, history, channels()}), "CausalConv1D", "state must be (", batch, ", ",
              history, ", ", channels(), ") for input ", x.describe(), ", got ", past.describe());
  // padded[:, j] is x[:, j - history]; tap k reads the window starting k steps in.
  const Tensor padded = cat({past, x}, 1);  // (B, history + T, C)
  Tensor y = bias;
  for (int64_t k = 0; k < width(); ++k) y = y + narrow(padded, 1, k, length) * select(weight, 1, k);
  if (final_state != nullptr) *final_state = narrow(padded, 1, length, history);
  return y;
}

Tensor CausalConv1D::step(const Tensor& x, Tensor& state) const {
  check_step_input(x, channels(), "CausalConv1D");
  return squeeze(forward(unsqueeze(x, 1), state, &state), 1);
}

}  // namespace linea::nn
