#include "nn/recurrent/rg_lru.h"

#include <cmath>

#include "autograd/node.h"
#include "nn/init.h"
#include "nn/layers/check.h"
#include "nn/mixer.h"
#include "nn/recurrent/linear_recurrence.h"

namespace linea::nn {

// forward was y = sqrt(z): dy/dz = 1 / (2 sqrt z), here with z floored at 1 / (4 max^2) so that
// it never exceeds max. The floor is a constant, so the backward is the ordinary one above it.
Tensor sqrt_bounded_derivative(const Tensor& z, double max_gradient) {
  LINEA_CHECK(max_gradient > 0, "sqrt_bounded_derivative", "max_gradient must be positive, got ", max_gradient);
  Tensor y;
  {
    NoGradGuard no_grad;  // the value is sqrt's own; only the recorded backward differs
    y = sqrt(z);
  }
  const double floor = 0.25 / (max_gradient * max_gradient);
  const autograd::SavedTensor saved(z);
  return autograd::record("sqrt_bounded_derivative", {z}, y, [saved, floor](const Tensor& gy) -> autograd::Grads {
    return {gy * (0.5 * rsqrt(clamp(saved.get(), floor, std::nullopt)))};
  });
}

BlockDiagonalLinear::BlockDiagonalLinear(int64_t width, int64_t heads, Generator& gen) {
  check_positive(width, "width", "BlockDiagonalLinear");
  check_positive(heads, "heads", "BlockDiagonalLinear");
  LINEA_CHECK(width % heads == 0, "BlockDiagonalLinear", "width ", width, " is not divisible by ", heads, " heads");
  const int64_t n = width / heads;
  weight = empty({heads, n, n});
  // LeCun normal over each block's own fan-in n (init::fans would read a 3-D tensor as a
  // convolution's (out, in, k) weight).
  init::normal_(weight, 0.0, 1.0 / std::sqrt(static_cast<double>(n)), gen);
  bias = zeros({width});
  register_parameter("weight", &weight);
  register_parameter("bias", &bias, /*weight_decay=*/false);
}

Tensor BlockDiagonalLinear::forward(const Tensor& x) const {
  const int64_t heads = weight.size(0), n = weight.size(1);
  check_last_dim(x, heads * n, "BlockDiagonalLinear");
  // (..., heads n) -> (heads, tokens, n): one (tokens x n) @ (n x n) product per block.
  const Tensor blocks = transpose(reshape(x, {-1, heads, n}), 0, 1);
  const Tensor y = transpose(matmul(blocks, weight), 0, 1);  // (tokens, heads, n)
  return reshape(y, x.shape()) + bias;
}

RGLRU::RGLRU(const RGLRUConfig& config, Generator& gen) : config_(config) {
  const RGLRUConfig& c = config_;
  check_positive(c.width, "width", "RGLRU");
  check_positive(c.heads, "heads", "RGLRU");
  LINEA_CHECK(c.width % c.heads == 0, "RGLRU", "width ", c.width, " is not divisible by ", c.heads, " heads");
  LINEA_CHECK(c.c > 0, "RGLRU", "c must be positive, got ", c.c);
  LINEA_CHECK(0 < c.a_min && c.a_min <= c.a_max && c.a_max < 1, "RGLRU", "needs 0 < a_min <= a_max < 1, got [",
              c.a_min, ", ", c.a_max, "]");
  LINEA_CHECK(c.max_sqrt_gradient > 0, "RGLRU", "max_sqrt_gradient must be positive, got ", c.max_sqrt_gradient);
  check_scan_options(c.scan, "RGLRU");
  gate_a = register_module("gate_a", std::make_shared<BlockDiagonalLinear>(c.width, c.heads, gen));
  gate_x = register_module("gate_x", std::make_shared<BlockDiagonalLinear>(c.width, c.heads, gen));
  // a^c = u ~ U[a_min, a_max], so a = u^(1/c) and Lambda = logit(a); softplus(-Lambda) is then
  // -log a, which makes log a_t = c r_t log a.
  lambda = empty({c.width});
  {
    NoGradGuard no_grad;
    const Tensor a = exp(log(uniform({c.width}, c.a_min, c.a_max, kFloat64, &gen)) / c.c);
    copy_(lambda, log(a) - log1p(neg(a)));
  }
  register_parameter("lambda", &lambda, /*weight_decay=*/false);
}

RGLRU::Coefficients RGLRU::coefficients(const Tensor& x) const {
  const Tensor r = sigmoid(gate_a->forward(x));
  const Tensor i = sigmoid(gate_x->forward(x));
  const Tensor log_a = (-config_.c) * r * softplus(neg(lambda));  // <= 0
  // sqrt(1 - a_t^2) = sqrt(-expm1(2 log a_t)): the argument is in [0, 1] and exact near a_t = 1.
  const Tensor norm = sqrt_bounded_derivative(neg(expm1(2.0 * log_a)), config_.max_sqrt_gradient);
  return {.log_a = log_a, .input = norm * (i * x)};
}

Tensor RGLRU::forward(const Tensor& x, const Tensor& h0, Tensor* final_h) const {
  check_sequence_input(x, config_.width, "RGLRU");
  const Coefficients k = coefficients(x);
  return linear_recurrence(k.log_a, k.input, h0, final_h, config_.scan);
}

Tensor RGLRU::init_state(int64_t batch) const {
  LINEA_CHECK(batch >= 0, "RGLRU", "batch must be non-negative, got ", batch);
  return zeros({batch, config_.width}, {lambda.dtype(), lambda.device()});
}

// forward is h_t = a_t h_{t-1} + sqrt(1 - a_t^2) i_t x_t.
Tensor RGLRU::step(const Tensor& x, Tensor& h) const {
  check_step_input(x, config_.width, "RGLRU");
  LINEA_CHECK(h.defined() && h.shape() == x.shape(), "RGLRU", "the state must be shaped like the input ",
              x.describe(), ", got ", h.defined() ? h.describe() : "undefined");
  const Coefficients k = coefficients(x);
  h = exp(k.log_a) * h + k.input;
  return h;
}

}  // namespace linea::nn
