#pragma once
// RG-LRU, the Real-Gated Linear Recurrent Unit of Griffin (De et al. 2024; docs/math.md#rg-lru),
// per channel of width W:
//
//   r_t = sigmoid(W_a x_t + b_a)              recurrence gate
//   i_t = sigmoid(W_x x_t + b_x)              input gate
//   log a_t = -c r_t softplus(-Lambda)        = c r_t log sigmoid(Lambda), i.e. a_t = a^(c r_t)
//   h_t = a_t h_{t-1} + sqrt(1 - a_t^2) (i_t x_t),     y_t = h_t
//
// with c = 8, a = sigmoid(Lambda) a learnable per-channel parameter. Everything about a_t is
// computed in log space: log a_t is finite and <= 0 for any finite inputs, and
// sqrt(1 - a_t^2) = sqrt(-expm1(2 log a_t)) keeps its precision when a_t is close to 1 (where
// 1 - a^2 itself would lose every digit).
//
// The sqrt's derivative 1 / (2 sqrt(z)) is unbounded as a_t -> 1 (r_t -> 0 or Lambda large):
// "clip the derivative of the sqrt near 0". sqrt_bounded_derivative below computes the exact
// value sqrt(z) but caps its derivative at max_sqrt_gradient (1000, RecurrentGemma's bound), i.e.
// uses 1 / (2 sqrt(max(z, 1 / (4 max^2)))): below z = 2.5e-7 (a_t above 1 - 1.25e-7) the
// gradient w.r.t. z stays at 1000 instead of growing without bound, and is finite at z = 0.
//
// Choices:
//   * W_a and W_x are block-diagonal with `heads` blocks, as in RecurrentGemma (each block a
//     dense (W/heads x W/heads) map, LeCun-normal, biases 0); heads = 1 gives the dense W_a, W_x
//     of the paper's equations.
//   * Lambda starts so that a^c is uniform in [a_min, a_max] = [0.9, 0.999]: a = u^(1/c),
//     Lambda = logit(a) = log a - log1p(-a).
//   * No reset at the first token: h_0 = sqrt(1 - a_0^2) (i_0 x_0) as the equations say
//     (RecurrentGemma drops the sqrt factor at a document's first token).
//
// Forms: forward runs the whole sequence (linear_recurrence.h: the gated scan), step
// one token; both can start from a state h (B, W) and hand the last one back.
#include <memory>

#include "nn/linear_attention/scan.h"
#include "nn/module.h"

namespace linea::nn {

// y = sqrt(z) (z >= 0) with dy/dz = 1 / (2 sqrt(max(z, 1 / (4 max_gradient^2)))) <= max_gradient.
Tensor sqrt_bounded_derivative(const Tensor& z, double max_gradient);

// y = x W + b with W block-diagonal: x (..., heads * n) -> (..., heads * n), block h mapping
// x[..., h n : (h+1) n] by weight[h] (n x n, input index first). Computed as `heads` matmuls of
// all tokens at once, never as a dense (heads n)^2 matrix.
class BlockDiagonalLinear : public Module {
 public:
  BlockDiagonalLinear(int64_t width, int64_t heads, Generator& gen);
  Tensor forward(const Tensor& x) const;

  Tensor weight;  // (heads, n, n), LeCun normal (fan-in n)
  Tensor bias;    // (heads * n), zeros, no weight decay
};

struct RGLRUConfig {
  int64_t width = 0;  // W channels (Griffin's D_rnn; in a GriffinConfig, 0 means d_model)
  int64_t heads = 1;  // blocks of W_a and W_x; must divide width
  double c = 8.0;
  double a_min = 0.9, a_max = 0.999;  // a^c ~ U[a_min, a_max] at init, 0 < a_min <= a_max < 1
  double max_sqrt_gradient = 1000.0;
  linear::ScanOptions scan{};  // forward's scan: fused, or the chunks of the parallel form
};

class RGLRU : public Module {
 public:
  RGLRU(const RGLRUConfig& config, Generator& gen);

  // x (B, T, W) -> h (B, T, W). h0 (B, W) or undefined (zeros); *final_h receives h_T.
  Tensor forward(const Tensor& x, const Tensor& h0 = Tensor(), Tensor* final_h = nullptr) const;
  Tensor init_state(int64_t batch) const;              // zeros (B, W)
  Tensor step(const Tensor& x, Tensor& h) const;       // x (B, W) -> h_t (B, W); h updated

  // log a_t and the recurrence's input sqrt(1 - a_t^2) i_t x_t, for x (..., W).
  struct Coefficients {
    Tensor log_a, input;
  };
  Coefficients coefficients(const Tensor& x) const;

  const RGLRUConfig& config() const { return config_; }

  std::shared_ptr<BlockDiagonalLinear> gate_a, gate_x;  // recurrence gate W_a, input gate W_x
  Tensor lambda;                                        // (W), no weight decay

 private:
  RGLRUConfig config_;
};

}  // namespace linea::nn
