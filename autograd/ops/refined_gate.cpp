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
//
// The gate projections' biases come in separately (a' = a + bias_a, c' = c + bias_c inside the
// kernels): added by the projection, each would be one more pass over (B, T, H, dv) forward, and
// slower than most, its broadcast costing an index division per element. Their gradients are
// those of a and c summed over the broadcast dims.
#include <cmath>

#include "autograd/ops/common.h"
#include "tensor/view.h"

namespace linea {

using namespace ops_detail;

namespace {

// A bias as the kernels take it: a view of a's shape (stride 0 along the broadcast dims), outside
// the graph (the op's backward gives the bias its gradient); zero when undefined.
Tensor bias_operand(const Tensor& bias, const Tensor& a, const char* name, const char* op) {
  if (!bias.defined()) return views::expand(scalar_like(0.0, a), a.shape());
  check_compatible(a, bias, op);
  bool broadcasts = bias.dim() <= a.dim();
  for (int64_t d = 1; broadcasts && d <= bias.dim(); ++d)
    broadcasts = bias.size(-d) == 1 || bias.size(-d) == a.size(-d);
  LINEA_CHECK(broadcasts, op, name, " must broadcast to ", a.describe(), ", got ", bias.describe());
  return views::expand(detach(bias), a.shape());
}

}  // namespace

// a, c (any shape, the same) and their optional biases -> out of that shape in a's memory order.
Tensor refined_log_gate(const Tensor& a, const Tensor& c, double floor, const Tensor& bias_a, const Tensor& bias_c) {
  const char* op = "refined_log_gate";
  check_compatible(a, c, op);
  LINEA_CHECK(a.shape() == c.shape(), op, "a (forget) and c (refine) must have one shape, got ", a.describe(), " and ",
              c.describe());
  LINEA_CHECK(!std::isnan(floor) && floor < INFINITY, op, "floor must be a number below +inf (-inf: none), got ",
              floor);
  const Tensor ba = bias_operand(bias_a, a, "bias_a", op), bc = bias_operand(bias_c, a, "bias_c", op);
  Tensor out = empty_like_order(a);
  if (a.numel() > 0) backend_for(a).refined_log_gate(a, c, ba, bc, floor, out);
  const Shape shape_a = bias_a.defined() ? bias_a.shape() : Shape{}, shape_c = bias_c.defined() ? bias_c.shape() : Shape{};
  return record(op, {a, c, bias_a, bias_c}, out,
                [as = SavedTensor(a), cs = SavedTensor(c), bas = SavedTensor(ba), bcs = SavedTensor(bc), floor,
                 shape_a, shape_c, has_a = bias_a.defined(), has_c = bias_c.defined(),
                 home_a = autograd::gradient_home(a),
                 home_c = autograd::gradient_home(c)](const Tensor& gout) -> Grads {
                  const Tensor a = as.get(), c = cs.get();
                  // Where a layer's gate projections split off a stacked product, straight into
                  // that product's gradient (autograd/node.h: GradientHome).
                  Tensor da = gradient_buffer(home_a, a), dc = gradient_buffer(home_c, c);
                  if (a.numel() > 0) backend_for(a).refined_log_gate_backward(a, c, bas.get(), bcs.get(), floor, gout, da, dc);
                  return {da, dc, has_a ? sum_to(da, shape_a) : Tensor(), has_c ? sum_to(dc, shape_c) : Tensor()};
                });
}

}  // namespace linea
