#include "train/grad_utils.h"

#include <cmath>

#include "autograd/ops.h"

namespace linea::train {

namespace {

// One float64 value per non-empty gradient, computed on the gradients' device by `per_grad`,
// as a 1-D tensor; undefined when there are none.
template <class Fn>
Tensor per_grad_values(const std::vector<Tensor>& params, Fn&& per_grad) {
  NoGradGuard no_grad;
  std::vector<Tensor> values;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (g.defined() && g.numel() > 0) values.push_back(per_grad(to(g, kFloat64)));
  }
  return values.empty() ? Tensor() : stack(values);
}

}  // namespace

Tensor grad_norm_squared(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (g.defined() && g.numel() > 0) grads.push_back(g);
  }
  // One fused pass over all gradients (Backend::sum_squares), in double.
  return grads.empty() ? Tensor() : sum(sum_squares(grads));
}

double read_norm(const Tensor& norm_squared) {
  return norm_squared.defined() ? std::sqrt(norm_squared.item()) : 0.0;
}

double grad_norm(const std::vector<Tensor>& params) { return read_norm(grad_norm_squared(params)); }

ClipResult clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  LINEA_CHECK(max_norm > 0, "clip_grad_norm", "max_norm must be > 0, got ", max_norm);
  return clip_by_norm(params, max_norm, grad_norm(params));
}

ClipResult plan_clip(double max_norm, double norm) {
  ClipResult result;
  result.norm = norm;
  result.finite = std::isfinite(norm);
  result.clipped = max_norm > 0 && result.finite && norm > max_norm;
  if (result.clipped) result.scale = max_norm / norm;
  return result;
}

ClipResult clip_by_norm(const std::vector<Tensor>& params, double max_norm, double norm) {
  const ClipResult result = plan_clip(max_norm, norm);
  if (!result.clipped) return result;
  NoGradGuard no_grad;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (g.defined()) mul_(g, result.scale);
  }
  return result;
}

bool grads_finite(const std::vector<Tensor>& params) {
  // amax propagates NaN, so one look at the largest magnitude sees both inf and NaN.
  const Tensor peaks = per_grad_values(params, [](const Tensor& g) { return amax(abs(g)); });
  return !peaks.defined() || std::isfinite(amax(peaks).item());
}

}  // namespace linea::train
