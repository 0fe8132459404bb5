#pragma once
// Linear: y = x W^T + b.
//   x (..., in) -> y (..., out);  W (out, in), b (out).
// W is stored (out, in) as in PyTorch, so checkpoints map one to one and a row of W is one
// output's weights; the product reads W^T as a transposed view (no copy).
// add_lora gives it a low-rank update (nn/layers/lora.h): y = x W^T + b + (alpha/r) (x A^T) B^T.
#include <memory>

#include "nn/layers/lora.h"
#include "nn/module.h"

namespace linea::nn {

// How W (and b) start. The default is PyTorch's, so a linea model and a PyTorch model built
// the same way start from the same distribution.
enum class LinearInit {
  Uniform,        // PyTorch's default: W, b ~ U(-1/sqrt(in), 1/sqrt(in)); scale-aware at any width
  XavierUniform,  // Glorot: W ~ U(+-sqrt(6 / (in + out))), b = 0
  LeCunNormal,    // W ~ N(0, 1 / in), b = 0
  Normal,         // W ~ N(0, std^2), b = 0: GPT-2 / Pythia style, std 0.02
};

struct LinearOptions {
  bool bias = true;
  LinearInit init = LinearInit::Uniform;
  double std = 0.02;  // for LinearInit::Normal only
};

class Linear : public Module {
 public:
  // Linear(512, 2048, gen) or Linear(512, 512, gen, {.bias = false, .init = LinearInit::Normal}).
  Linear(int64_t in_features, int64_t out_features, Generator& gen, LinearOptions options = {});

  Tensor forward(const Tensor& x) const { return forward(x, x.dtype()); }
  // The same with the result in `out`: under bfloat16 precision, a branch's last product on
  // bfloat16 activations writes the float32 residual stream's dtype (nn/precision.h: stream_dtype).
  Tensor forward(const Tensor& x, DType out) const;
  // x W^T alone (with the LoRA update, if any), for a caller that adds the bias inside a fused op
  // of its own.
  Tensor forward_without_bias(const Tensor& x) const { return forward_without_bias(x, x.dtype()); }
  Tensor forward_without_bias(const Tensor& x, DType out) const;

  // Adds a LoRA adapter (a child named "lora", initialised from gen, on the weight's device and
  // dtype). Once per Linear.
  void add_lora(int64_t rank, double alpha, Generator& gen);

  int64_t in_features() const { return weight.size(1); }
  int64_t out_features() const { return weight.size(0); }
  bool has_bias() const { return bias.defined(); }

  // Registered by pointer ("weight", "bias"): assigning a tensor here replaces the parameter.
  Tensor weight;  // (out, in), weight decay
  Tensor bias;    // (out), no weight decay; undefined without bias
  std::shared_ptr<LoraAdapter> lora;  // null without LoRA
};

}  // namespace linea::nn
