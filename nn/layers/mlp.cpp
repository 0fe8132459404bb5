#include "nn/layers/mlp.h"

#include "nn/layers/check.h"
#include "nn/layers/fused_product.h"
#include "nn/precision.h"

namespace linea::nn {

Tensor activate(const Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::Gelu: return gelu(x);
    case Activation::GeluTanh: return gelu(x, GeluApprox::Tanh);
    case Activation::Relu: return relu(x);
    case Activation::Silu: return silu(x);
  }
  fail("activate", "unknown activation");
}

namespace {

std::shared_ptr<Linear> make_linear(int64_t in, int64_t out, Generator& gen, const MLPOptions& options) {
  return std::make_shared<Linear>(in, out, gen, LinearOptions{.bias = options.bias, .init = options.init});
}

}  // namespace

MLP::MLP(int64_t dim, int64_t hidden, Generator& gen, MLPOptions options) : activation_(options.activation) {
  check_positive(hidden, "hidden", "MLP");
  fc1 = register_module("fc1", make_linear(dim, hidden, gen, options));
  fc2 = register_module("fc2", make_linear(hidden, dim, gen, options));
}

// On bfloat16 activations the last product writes the float32 stream's dtype (stream_dtype).
Tensor MLP::forward(const Tensor& x) const {
  return fc2->forward(activate(fc1->forward(x), activation_), stream_dtype(x));
}

Tensor MLP::residual_step(const Tensor& x, const Norm& norm) const {
  const Tensor hidden = fused_product(*fc1, x, {.input_norm = &norm, .activation = activation_});
  return fused_product(*fc2, hidden, {.residual = x});
}

Tensor MLP::residual_prefill(const Tensor& x, const Norm& norm) const {
  const Tensor hidden = fused_product(*fc1, x, {.input_norm = &norm, .activation = activation_});
  return add_product_into(x, *fc2, hidden);
}

GatedMLP::GatedMLP(int64_t dim, int64_t hidden, Generator& gen, MLPOptions options)
    : activation_(options.activation) {
  check_positive(hidden, "hidden", "GatedMLP");
  gate = register_module("gate", make_linear(dim, hidden, gen, options));
  up = register_module("up", make_linear(dim, hidden, gen, options));
  down = register_module("down", make_linear(hidden, dim, gen, options));
}

Tensor GatedMLP::forward(const Tensor& x) const {
  return down->forward(activate(gate->forward(x), activation_) * up->forward(x), stream_dtype(x));
}

Tensor GatedMLP::residual_step(const Tensor& x, const Norm& norm) const {
  const Tensor hidden = fused_product(*gate, x, {.input_norm = &norm, .activation = activation_, .up = up.get()});
  return fused_product(*down, hidden, {.residual = x});
}

Tensor GatedMLP::residual_prefill(const Tensor& x, const Norm& norm) const {
  const Tensor hidden = fused_product(*gate, x, {.input_norm = &norm, .activation = activation_, .up = up.get()});
  return add_product_into(x, *down, hidden);
}

}  // namespace linea::nn
