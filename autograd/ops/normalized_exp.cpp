// ReGLA's normalized exponential feature map as one differentiable op over two fused kernels
// (tensor/backend.h: normalized_exp, normalized_exp_backward), instead of the composite chains of
// nn/linear_attention: exp(x - amax(x)) times the scale for queries (four passes over x and as many back),
// and for keys exp(x - mu) exp(mu - m) with m the running max of mu by doubling (key_max.cpp:
// narrow/where/cat/compare in each of ceil(log2 T) rounds, forward and backward)
// (tests/autograd/fused_vs_composite_test.cpp checks the two against each other).
//
// forward was y_t,c = scale exp(x_t,c - m_t), with m_t one element of x (or previous), so:
//   dy_t,c / dx_t,c = y_t,c            (through the exponent)
//   dy_t,c / dm_t   = -y_t,c           (through the max)
// hence dx_t,c += y_t,c dy_t,c, and the total gradient of m_t, g_t = dm_t - sum_c y_t,c dy_t,c,
// goes to the element that m_t equals: with RowMax the first feature of row t holding it; with
// PrefixMax that of the earliest row s <= t whose max is m_t, or previous when it holds m_t.
// A max is piecewise the identity of one element, so this is its exact gradient away from ties,
// and the composite's on ties across positions (key_max.cpp keeps the earlier); on a tie within
// a token amax would split g evenly where this gives it to the first feature.
// Saved: x (to find a max's column again), the results y and m, and previous.
#include <cmath>

#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {

constexpr const char* kOp = "normalized_exp";

void check_inputs(const Tensor& x, NormalizedExpMode mode, double scale, const Tensor& previous) {
  check_floating(x, kOp);
  LINEA_CHECK(x.dim() == 4, kOp, "expects x (B, H, T, d), got ", x.describe());
  LINEA_CHECK(x.size(3) > 0, kOp, "needs at least one feature (d >= 1) to take a max over, got ", x.describe());
  LINEA_CHECK(std::isfinite(scale), kOp, "scale must be finite, got ", scale);
  if (!previous.defined()) return;
  LINEA_CHECK(mode == NormalizedExpMode::PrefixMax, kOp,
              "previous (a running max of earlier tokens) goes with PrefixMax only; RowMax got ", previous.describe());
  check_compatible(x, previous, kOp);
  LINEA_CHECK(previous.shape() == Shape({x.size(0), x.size(1), 1, 1}), kOp, "previous must be (B, H, 1, 1) = (",
              x.size(0), ", ", x.size(1), ", 1, 1) for x ", x.describe(), ", got ", previous.describe());
}

}  // namespace

// x (B, H, T, d), previous (B, H, 1, 1) or undefined -> y (B, H, T, d) in x's memory order,
// m (B, H, T, 1) and, for PrefixMax, m's last position (B, H, 1, 1).
NormalizedExp normalized_exp(const Tensor& x, NormalizedExpMode mode, double scale, const Tensor& previous) {
  check_inputs(x, mode, scale, previous);
  const Shape m_shape{x.size(0), x.size(1), x.size(2), 1};
  const Tensor rows = contiguous_rows(x);
  const Tensor prev = previous.defined() ? contiguous(detach(previous)) : Tensor();
  Tensor y = empty_in_order_of(x.shape(), x.strides(), x.dtype(), x.device());
  Tensor m = empty(m_shape, x.dtype(), x.device());
  const bool need_x = x.requires_grad(), need_previous = previous.defined() && previous.requires_grad();
  Tensor last = mode == NormalizedExpMode::PrefixMax && !autograd::needs_grad({x, previous}) && m.numel() > 0
                    ? empty({x.size(0), x.size(1), 1, 1}, x.dtype(), x.device())
                    : Tensor();
  if (m.numel() > 0) backend_for(x).normalized_exp(rows, mode, scale, prev, y, m, last);
  // Two outputs of one node: a gradient that reaches only y (the query map's max is never used)
  // costs nothing for m, and neither is padded to the other's size.
  const std::vector<Tensor> out = record_outputs(
      kOp, {x, previous}, {y, m},
      [xs = SavedTensor(rows), ys = SavedTensor(y), ms = SavedTensor(m), prevs = SavedTensor(prev), mode,
       order = x.strides(), need_x, need_previous,
       home = autograd::gradient_home(x)](const std::vector<Tensor>& g) -> Grads {
        const Tensor x = xs.get(), y = ys.get(), m = ms.get(), prev = prevs.get();
        const Tensor dy = g[0].defined() ? contiguous_rows(g[0]) : zeros(y.shape(), {y.dtype(), y.device()});
        const Tensor dm = g[1].defined() ? contiguous(g[1]) : zeros(m.shape(), {m.dtype(), m.device()});
        // x's place in a stacked product's gradient when it was split off one (a linear attention
        // layer's q and k: autograd/node.h, GradientHome), else x's memory order.
        Tensor dx = need_x ? claim_rows(home) : Tensor();
        if (!dx.defined()) dx = empty_in_order_of(x.shape(), order, x.dtype(), x.device());
        Tensor dprev = need_previous ? empty(prev.shape(), prev.dtype(), prev.device()) : Tensor();
        if (m.numel() > 0) {
          backend_for(x).normalized_exp_backward(x, y, m, prev, dy, dm, mode, dx, dprev);
        } else if (dprev.defined()) {
          fill_(dprev, 0.0);  // no position: nothing reached previous
        }
        return {need_x ? dx : Tensor(), dprev};
      });
  if (mode == NormalizedExpMode::PrefixMax && !last.defined() && m.numel() > 0)
    last = narrow(out[1], 2, x.size(2) - 1, 1);
  return {out[0], out[1], last};
}

}  // namespace linea
