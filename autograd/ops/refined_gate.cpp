// ReGLA's refined gate, floored, as one differentiable op over two fused elementwise kernels
// (tensor/backend.h: refined_log_gate), instead of the composite chain of nn/linear_attention/gates.cpp and
// GateBase::floored: three log-sigmoids, a log-add-exp of five ops, two sums and a clamp, each a
// pass over (B, T, H, dv) forward and more backward
// (tests/autograd/fused_vs_composite_test.cpp checks the two against each other).
//
// forward was out = max(log f, floor), log f = log g + log u, g = sigmoid(a), r = sigmoid(c),
// u = g + 2 r (1 - g), so where log f > floor (tensor/scalar_math.h writes it out):
//   d out / da = (1 - g) + g (1 - g)(1 - 2 r) / u
//   d out / dc = 2 (1 - g) r (1 - r) / u
// and 0 where the floor holds, at the floor itself included, as clamp's gradient is. Nothing is
// saved but a and c: the backward recomputes every term, which costs less than reading them.
#include <cmath>

#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

// a, c (any shape, the same) -> out of that shape in a's memory order.
Tensor refined_log_gate(const Tensor& a, const Tensor& c, double floor) {
  const char* op = "refined_log_gate";
  check_compatible(a, c, op);
  LINEA_CHECK(a.shape() == c.shape(), op, "a (forget) and c (refine) must have one shape, got ", a.describe(), " and ",
              c.describe());
  LINEA_CHECK(!std::isnan(floor) && floor < INFINITY, op, "floor must be a number below +inf (-inf: none), got ",
              floor);
  Tensor out = empty_like_order(a);
  if (a.numel() > 0) backend_for(a).refined_log_gate(a, c, floor, out);
  return record(op, {a, c}, out, [as = SavedTensor(a), cs = SavedTensor(c), floor](const Tensor& gout) -> Grads {
    const Tensor a = as.get(), c = cs.get();
    Tensor da = empty_like_order(a), dc = empty_like_order(c);
    if (a.numel() > 0) backend_for(a).refined_log_gate_backward(a, c, floor, gout, da, dc);
    return {da, dc};
  });
}

}  // namespace linea
