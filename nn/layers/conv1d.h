#pragma once
// CausalConv1D: a depthwise causal convolution over time, Griffin's short convolution before the
// RG-LRU (docs/math.md#causal-convolution). Each channel c has its own `width` taps w[c, :]:
//
//   y[b, t, c] = bias[c] + sum_{k < width} w[c, k] * x[b, t - (width - 1) + k, c]
//
// with x = 0 before t = 0 (left zero padding), so y_t depends on x_{t-width+1..t} only; the last
// tap w[c, width - 1] weighs the current input (PyTorch's Conv1d(C, C, width, groups=C,
// padding=width-1), truncated to T outputs, computes the same).
//   x (B, T, C) -> y (B, T, C);  w (C, width), bias (C)
//
// The decoding form keeps the last width - 1 inputs as its state, (B, width - 1, C):
//   state = init_state(B); y_t = step(x_t, state) for t = 0, 1, ...   equals forward(x)
// and forward itself can start from a state and return one, so a prompt can be run in one
// forward and then continued token by token.
//
// Init: w ~ N(0, 1 / width) (LeCun normal over the taps: a window average of unit-variance
// inputs keeps unit variance), bias = 0.
#include "nn/module.h"

namespace linea::nn {

class CausalConv1D : public Module {
 public:
  CausalConv1D(int64_t channels, Generator& gen, int64_t width = 4);

  // x (B, T, C). initial_state (B, width - 1, C), or undefined for zeros (the sequence starts
  // here); when final_state is given it receives the last width - 1 inputs (with the initial
  // state in front when T < width - 1).
  Tensor forward(const Tensor& x, const Tensor& initial_state = Tensor(), Tensor* final_state = nullptr) const;

  Tensor init_state(int64_t batch) const;                // zeros (B, width - 1, C)
  Tensor step(const Tensor& x, Tensor& state) const;     // x (B, C) -> (B, C); state updated

  int64_t channels() const { return weight.size(0); }
  int64_t width() const { return weight.size(1); }

  Tensor weight;  // (C, width)
  Tensor bias;    // (C), no weight decay
};

}  // namespace linea::nn
