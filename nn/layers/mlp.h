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

// What a block needs of its feed-forward part, whichever kind (nn/model.cpp). Both kinds are
// last(act(first(x)) * up(x)), MLP without the up branch, so the forward and the fused decoding
// forms are written here once, over the products each kind's constructor registers.
class FeedForward : public Module {
 public:
  Tensor forward(const Tensor& x) const;  // (..., dim) -> (..., dim)
  // A block's decoding step around it: x + forward(norm(x)), with the norm and the activation
  // folded into the first product and the addition into the last (nn/layers/fused_product.h).
  Tensor residual_step(const Tensor& x, const Norm& norm) const;
  // The same over a prompt's rows, x being the caller's own running sum: the last product adds
  // into x's memory (add_product_into; SequenceMixer::residual_prefill says when that is allowed).
  Tensor residual_prefill(const Tensor& x, const Norm& norm) const;

 protected:
  explicit FeedForward(Activation activation) : activation_(activation) {}
  // The kind's products under their generic roles (up: null without a gating branch).
  std::shared_ptr<Linear> first_, up_, last_;

 private:
  // norm(x) through the first product, the activation and the up branch: the last product's input.
  Tensor fused_hidden(const Tensor& x, const Norm& norm) const;

  Activation activation_;
};

class MLP : public FeedForward {
 public:
  MLP(int64_t dim, int64_t hidden, Generator& gen, MLPOptions options = {});

  std::shared_ptr<Linear> fc1;  // D -> hidden
  std::shared_ptr<Linear> fc2;  // hidden -> D
};

class GatedMLP : public FeedForward {
 public:
  GatedMLP(int64_t dim, int64_t hidden, Generator& gen, MLPOptions options = {});

  std::shared_ptr<Linear> gate;  // D -> hidden, through the activation
  std::shared_ptr<Linear> up;    // D -> hidden, linear
  std::shared_ptr<Linear> down;  // hidden -> D
};

}  // namespace linea::nn
