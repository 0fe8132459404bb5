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

// On bfloat16 activations the last product writes the float32 stream's dtype (stream_dtype).
Tensor FeedForward::forward(const Tensor& x) const {
  Tensor hidden = activate(first_->forward(x), activation_);
  if (up_) hidden = hidden * up_->forward(x);
  return last_->forward(hidden, stream_dtype(x));
}

Tensor FeedForward::fused_hidden(const Tensor& x, const Norm& norm) const {
  return fused_product(*first_, x, {.input_norm = &norm, .activation = activation_, .up = up_.get()});
}

Tensor FeedForward::residual_step(const Tensor& x, const Norm& norm) const {
  return fused_product(*last_, fused_hidden(x, norm), {.residual = x});
}

Tensor FeedForward::residual_prefill(const Tensor& x, const Norm& norm) const {
  return add_product_into(x, *last_, fused_hidden(x, norm));
}

MLP::MLP(int64_t dim, int64_t hidden, Generator& gen, MLPOptions options) : FeedForward(options.activation) {
  check_positive(hidden, "hidden", "MLP");
  fc1 = first_ = register_module("fc1", make_linear(dim, hidden, gen, options));
  fc2 = last_ = register_module("fc2", make_linear(hidden, dim, gen, options));
}

GatedMLP::GatedMLP(int64_t dim, int64_t hidden, Generator& gen, MLPOptions options)
    : FeedForward(options.activation) {
  check_positive(hidden, "hidden", "GatedMLP");
  gate = first_ = register_module("gate", make_linear(dim, hidden, gen, options));
  up = up_ = register_module("up", make_linear(dim, hidden, gen, options));
  down = last_ = register_module("down", make_linear(hidden, dim, gen, options));
}

}  // namespace linea::nn
