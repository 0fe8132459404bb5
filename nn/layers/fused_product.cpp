#include "nn/layers/fused_product.h"

#include <functional>

#include "nn/layers/check.h"
#include "nn/precision.h"

namespace linea::nn {

bool fuses_products(const Tensor& x) {
  return !is_grad_enabled() && (x.dtype() == kFloat64 || product_precision() == Precision::Float32);
}

UnaryOp unary_op_of(Activation activation) {
  switch (activation) {
    case Activation::Gelu: return UnaryOp::GeluErf;
    case Activation::GeluTanh: return UnaryOp::GeluTanh;
    case Activation::Relu: return UnaryOp::Relu;
    case Activation::Silu: return UnaryOp::Silu;
  }
  fail("fused_product", "unknown activation");
}

namespace {

// The fused op on x's rows, flattened to (N, in) and back.
Tensor run_fused(const Tensor& weight, const Tensor& bias, const Linear* up, const Tensor& x,
                 const ProductFusion& fusion) {
  check_last_dim(x, weight.size(1), "fused_product");
  Shape out_shape = x.shape();
  out_shape.back() = weight.size(0);
  FusedLinearInputs in{.x = reshape(x, {-1, weight.size(1)}), .weight = weight, .bias = bias};
  FusedLinearOptions options;
  if (up) {
    in.up_weight = up->weight;
    in.up_bias = up->bias;
  }
  if (fusion.input_norm) {
    const InputNorm norm = fusion.input_norm->as_input_norm();
    options.norm = norm.kind;
    options.norm_eps = norm.eps;
    in.norm_weight = norm.weight;
    in.norm_bias = norm.bias;
  }
  if (fusion.activation) {
    options.activate = true;
    options.activation = unary_op_of(*fusion.activation);
  }
  if (fusion.residual.defined()) in.residual = reshape(fusion.residual, {-1, weight.size(0)});
  return reshape(fused_linear(in, options), out_shape);
}

// The modules one by one: what the fusion stands for.
Tensor run_modules(const std::function<Tensor(const Tensor&)>& product, const Linear* up, const Tensor& x,
                   const ProductFusion& fusion) {
  const Tensor input = fusion.input_norm ? fusion.input_norm->forward(x) : x;
  Tensor y = product(input);
  if (fusion.activation) y = activate(y, *fusion.activation);
  if (up) y = y * up->forward(input);
  return fusion.residual.defined() ? fusion.residual + y : y;
}

}  // namespace

Tensor fused_product(const Linear& linear, const Tensor& x, const ProductFusion& fusion) {
  const bool adapted = linear.lora || (fusion.up && fusion.up->lora);
  if (fuses_products(x) && !adapted) return run_fused(linear.weight, linear.bias, fusion.up, x, fusion);
  return run_modules([&](const Tensor& input) { return linear.forward(input); }, fusion.up, x, fusion);
}

Tensor add_product_into(const Tensor& residual, const Linear& linear, const Tensor& x) {
  if (!fuses_products(x) || linear.lora || !residual.is_contiguous() || residual.dtype() != x.dtype())
    return residual + linear.forward(x);
  check_last_dim(x, linear.weight.size(1), "add_product_into");
  Tensor sum = residual;
  matmul_add_(sum, x, t(linear.weight));
  if (linear.bias.defined()) add_(sum, linear.bias);
  return sum;
}

Tensor fused_product(const Tensor& weight, const Tensor& bias, const Tensor& x, const ProductFusion& fusion) {
  LINEA_CHECK(fusion.up == nullptr, "fused_product", "a gated unit takes Linear layers");
  if (fuses_products(x)) return run_fused(weight, bias, nullptr, x, fusion);
  return run_modules(
      [&](const Tensor& input) {
        const Tensor y = linear_product(input, weight);
        return bias.defined() ? y + bias : y;
      },
      nullptr, x, fusion);
}

}  // namespace linea::nn
