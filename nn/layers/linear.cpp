#include "nn/layers/linear.h"

#include <cmath>

#include "nn/init.h"
#include "nn/layers/check.h"
#include "nn/precision.h"

namespace linea::nn {

Linear::Linear(int64_t in_features, int64_t out_features, Generator& gen, LinearOptions options) {
  check_positive(in_features, "in_features", "Linear");
  check_positive(out_features, "out_features", "Linear");
  weight = empty({out_features, in_features});
  if (options.bias) bias = zeros({out_features});
  switch (options.init) {
    case LinearInit::Uniform: {
      // kaiming_uniform(a = sqrt(5)) in PyTorch's terms, which is this bound.
      const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
      init::uniform_(weight, -bound, bound, gen);
      if (options.bias) init::uniform_(bias, -bound, bound, gen);
      break;
    }
    case LinearInit::XavierUniform: init::xavier_uniform_(weight, gen); break;
    case LinearInit::LeCunNormal: init::lecun_normal_(weight, gen); break;
    case LinearInit::Normal: init::normal_(weight, 0.0, options.std, gen); break;
  }
  register_parameter("weight", &weight);
  if (options.bias) register_parameter("bias", &bias, /*weight_decay=*/false);
}

Tensor Linear::forward(const Tensor& x, DType out) const {
  const Tensor y = forward_without_bias(x, out);
  if (!bias.defined()) return y;
  return y + linea::to(bias, y.dtype());  // bfloat16 activations: the bias rounded (to() is a no-op otherwise)
}

Tensor Linear::forward_without_bias(const Tensor& x, DType out) const {
  check_last_dim(x, in_features(), "Linear");
  // matmul folds the leading dims into the rows of one GEMM against the shared W^T; in bfloat16
  // under --precision bf16 (nn/precision.h).
  const Tensor y = linear_product(x, weight, out);
  if (!lora) return y;
  // The adapter in float32 (its matrices' dtype), its update rounded into bfloat16 activations.
  return y + linea::to(lora->forward(linea::to(x, weight.dtype())), y.dtype());
}

void Linear::add_lora(int64_t rank, double alpha, Generator& gen) {
  LINEA_CHECK(!lora, "Linear", "add_lora: this layer already has a LoRA adapter");
  lora = register_module("lora", std::make_shared<LoraAdapter>(in_features(), out_features(), rank, alpha, gen));
  lora->to(weight.dtype());
  lora->to(weight.device());
}

}  // namespace linea::nn
