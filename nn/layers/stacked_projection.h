#pragma once
// Several Linear layers that read the same input, applied as one matrix product.
//
// A decoding step of a linear attention layer projects one token five ways (q, k, v and the
// gate's two pre-activations): at batch 1 each is a small matrix-vector product, bound by the
// launch and not by the work. StackedProjection concatenates the weights once ((sum out, in))
// and hands back each part's result as a view of the one product. The concatenation is a cache:
// it is built again when any source tensor changes (another tensor, or the same one written in
// place: its storage's version), so an optimizer step or a loaded checkpoint is never missed.
// The product is a fused_product (nn/layers/fused_product.h): the norm of its input may be folded
// into it. While grad mode is on, under bfloat16 products, or when a part has a LoRA adapter, the
// parts run one by one as they would alone (the cache is for inference; its product has no path
// back to the weights).
#include <vector>

#include "nn/layers/linear.h"
#include "nn/layers/norm.h"

namespace linea::nn {

class StackedProjection {
 public:
  struct Part {
    const Linear* linear;
    bool with_bias;  // add the layer's bias (false: the caller adds it inside a fused op)
  };

  // x (..., in) -> one (..., out_i) per part, in order, of input_norm(x) when a norm is given.
  // Every part must take x's width.
  std::vector<Tensor> forward(const std::vector<Part>& parts, const Tensor& x, const Norm* input_norm = nullptr);

 private:
  bool cache_matches(const std::vector<Part>& parts) const;
  void rebuild(const std::vector<Part>& parts);

  Tensor weight_;                // (sum out, in): the parts' weights, stacked (one part's own)
  Tensor bias_;                  // (sum out) or undefined: their biases (zeros where not added)
  std::vector<Tensor> sources_;  // the weights and biases it was built from (held, so that
                                 // their storage cannot be freed and reused unnoticed)
  std::vector<uint64_t> versions_;
};

}  // namespace linea::nn
