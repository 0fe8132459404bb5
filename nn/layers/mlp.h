#pragma once
// The feed-forward blocks of a transformer or Griffin layer.
//
//   MLP        y = fc2(act(fc1(x)))                      x (..., D) -> (..., hidden) -> (..., D)
//   GatedMLP   y = down(act(gate(x)) * up(x))            x (..., D) -> 2 x (..., hidden) -> (..., D)
//
// GatedMLP with Activation::Gelu is GeGLU, with Activation::Silu SwiGLU (Shazeer 2020).
// Griffin's MLP (docs/math.md#griffin-recurrent-block) is GeGLU with hidden = 3 D: two branches
// of width 3D, GeLU on one, their product, a linear map back to D; RecurrentGemma uses the tanh
// approximation of GeLU (Activation::GeluTanh).
#include <memory>

#include "nn/layers/linear.h"
#include "nn/layers/norm.h"

namespace linea::nn {

enum class Activation {
  Gelu,      // exact, with erf
  GeluTanh,  // the tanh approximation
  Relu,
  Silu,  // x * sigmoid(x), "swish"
};
Tensor activate(const Tensor& x, Activation activation);

struct MLPOptions {
  Activation activation = Activation::Gelu;
  bool bias = true;
  LinearInit init = LinearInit::Uniform;
};

// What a block needs of its feed-forward part, whichever kind (nn/model.cpp).
class FeedForward : public Module {
 public:
  virtual Tensor forward(const Tensor& x) const = 0;  // (..., dim) -> (..., dim)
  // A block's decoding step around it: x + forward(norm(x)), with the norm and the activation
  // folded into the first product and the addition into the last (nn/layers/fused_product.h).
  virtual Tensor residual_step(const Tensor& x, const Norm& norm) const = 0;
  // The same over a prompt's rows, x being the caller's own running sum: the last product adds
  // into x's memory (add_product_into; SequenceMixer::residual_prefill says when that is allowed).
  virtual Tensor residual_prefill(const Tensor& x, const Norm& norm) const = 0;
};

class MLP : public FeedForward {
 public:
  MLP(int64_t dim, int64_t hidden, Generator& gen, MLPOptions options = {});
  Tensor forward(const Tensor& x) const override;
  Tensor residual_step(const Tensor& x, const Norm& norm) const override;
  Tensor residual_prefill(const Tensor& x, const Norm& norm) const override;

  std::shared_ptr<Linear> fc1;  // D -> hidden
  std::shared_ptr<Linear> fc2;  // hidden -> D

 private:
  Activation activation_;
};

class GatedMLP : public FeedForward {
 public:
  GatedMLP(int64_t dim, int64_t hidden, Generator& gen, MLPOptions options = {});
  Tensor forward(const Tensor& x) const override;
  Tensor residual_step(const Tensor& x, const Norm& norm) const override;
  Tensor residual_prefill(const Tensor& x, const Norm& norm) const override;

  std::shared_ptr<Linear> gate;  // D -> hidden, through the activation
  std::shared_ptr<Linear> up;    // D -> hidden, linear
  std::shared_ptr<Linear> down;  // hidden -> D

 private:
  Activation activation_;
};

}  // namespace linea::nn
