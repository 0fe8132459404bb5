#pragma once
// Several Linear layers that read the same input, applied as one matrix product.
//
// A linear attention layer projects its input five ways (q, k, v and the gate's two
// pre-activations). As five products, each is too narrow to fill the GPU in the backward pass:
// measured on an H200 (tools/gpu/gemm_shapes.cu, 16k tokens, width 512), the five weight
// gradients took 291 us against 196 us as one, and the input's gradient (five products and four
// additions) 284 us against 174 us. StackedProjection runs them as one product and hands back
// each part's result as a view of it:
//   - while grad mode is on (training), through autograd: the weights concatenated (cat), one
//     product in this thread's precision, its result split into the parts (split: one node whose
//     backward assembles every part's gradient in one buffer; the ops that make them, the feature
//     maps, the refined gate and the scan, write them into their places there: autograd/node.h,
//     GradientHome);
//   - for inference, from a cache of the concatenated weights, built again when any source tensor
//     changes (another tensor, or the same one written in place: its storage's version), so an
//     optimizer step or a loaded checkpoint is never missed. Its product is a fused_product
//     (nn/layers/fused_product.h): the norm of its input may be folded into it, and at batch 1 (a
//     decoding step) it is one matrix-vector kernel instead of five launches.
// A part with a LoRA adapter makes the parts run one by one, as they would alone.
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
