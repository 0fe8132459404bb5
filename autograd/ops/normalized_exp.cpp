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
// m (B, H, T, 1).
NormalizedExp normalized_exp(const Tensor& x, NormalizedExpMode mode, double scale, const Tensor& previous) {
  check_inputs(x, mode, scale, previous);
  const Shape m_shape{x.size(0), x.size(1), x.size(2), 1};
  auto split = [shape = x.shape(), order = x.strides(), m_shape](const Tensor& flat) {
    return split_flat(flat, shape, order, m_shape);  // (y, m)
  };
  const Tensor rows = contiguous_rows(x);
  const Tensor prev = previous.defined() ? contiguous(detach(previous)) : Tensor();
  Tensor flat = empty({x.numel() + numel_of(m_shape)}, x.dtype(), x.device());
  if (numel_of(m_shape) > 0) {
    const TwoResults out = split(flat);
    backend_for(x).normalized_exp(rows, mode, scale, prev, out.first, out.second);
  }
  const bool need_x = x.requires_grad(), need_previous = previous.defined() && previous.requires_grad();
  flat = record(kOp, {x, previous}, flat,
                [xs = SavedTensor(rows), outs = SavedTensor(flat), prevs = SavedTensor(prev), mode, split,
                 order = x.strides(), need_x, need_previous](const Tensor& gflat) -> Grads {
                  const Tensor x = xs.get(), prev = prevs.get();
                  const TwoResults out = split(outs.get()), grads = split(contiguous(gflat));
                  Tensor dx = empty_in_order_of(x.shape(), order, x.dtype(), x.device());
                  Tensor dprev = need_previous ? empty(prev.shape(), prev.dtype(), prev.device()) : Tensor();
                  if (out.second.numel() > 0) {
                    backend_for(x).normalized_exp_backward(x, out.first, out.second, prev, grads.first,
                                                           grads.second, mode, dx, dprev);
                  } else if (dprev.defined()) {
                    fill_(dprev, 0.0);  // no position: nothing reached previous
                  }
                  return {need_x ? dx : Tensor(), dprev};
                });
  const TwoResults out = split(flat);
  return {out.first, out.second};
}

}  // namespace linea
