// The optimizer's kernels as ops: the gradient norm's sums of squares (train/clip) and the AdamW
// update (train/adamw.cpp). Like the in-place ops (inplace.cpp) they work outside autograd; they
// check what the kernels assume, then call the device's kernel once for many tensors.
#include <cmath>

#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

Tensor sum_squares(const std::vector<Tensor>& xs) {
  LINEA_CHECK(!xs.empty(), "sum_squares", "needs at least one tensor");
  for (const Tensor& x : xs) {
    check_floating(x, "sum_squares");
    LINEA_CHECK(x.device() == xs[0].device(), "sum_squares", "tensors are on different devices: ", xs[0].describe(),
                " and ", x.describe());
  }
  Tensor out = empty({static_cast<int64_t>(xs.size())}, kFloat64, xs[0].device());
  backend_for(xs[0]).sum_squares(xs, out);
  return out;
}

namespace {
// The kernel walks p, m and v as flat arrays. Parameters made by modules and the buffers made by
// the optimizer are contiguous; a strided view is updated through a contiguous copy.
Tensor flat(const Tensor& t) { return t.is_contiguous() ? t : clone(t); }

// After the kernel wrote `updated` (t itself, or its flat copy) in place: copies a flat copy
// back, and bumps t's version so that a tensor saved for backward before the step fails its check.
void written_back(const Tensor& t, const Tensor& updated) {
  if (updated.is_same(t)) {
    t.bump_version();
  } else {
    Tensor target = t;
    copy_(target, updated);  // bumps the version itself
  }
}
}  // namespace

void adamw_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                 const std::vector<bool>& decay, const AdamWHyper& hyper) {
  const char* op = "adamw_step_";
  LINEA_CHECK(!params.empty(), op, "needs at least one parameter");
  LINEA_CHECK(grads.size() == params.size() && exp_avg.size() == params.size() &&
                  exp_avg_sq.size() == params.size() && decay.size() == params.size(),
              op, "needs one gradient, two moment buffers and one decay flag per parameter");
  LINEA_CHECK(hyper.step >= 1, op, "the step count starts at 1, got ", hyper.step);
  LINEA_CHECK(std::isfinite(hyper.grad_scale), op, "the gradients' scale must be finite, got ", hyper.grad_scale);
  std::vector<Tensor> p, g, m, v;
  for (size_t i = 0; i < params.size(); ++i) {
    check_floating(params[i], op);
    for (const Tensor* x : {&grads[i], &exp_avg[i], &exp_avg_sq[i]}) {
      check_compatible(params[i], *x, op);
      LINEA_CHECK(x->shape() == params[i].shape(), op, "parameter ", params[i].describe(), " with a buffer of ",
                  x->describe());
    }
    LINEA_CHECK(params[i].device() == params[0].device() && params[i].dtype() == params[0].dtype(), op,
                "one call takes parameters of one device and dtype, got ", params[0].describe(), " and ",
                params[i].describe());
    p.push_back(flat(params[i]));
    g.push_back(flat(grads[i]));
    m.push_back(flat(exp_avg[i]));
    v.push_back(flat(exp_avg_sq[i]));
  }
  backend_for(p.front()).adamw_step(p, g, m, v, decay, hyper);
  for (size_t i = 0; i < params.size(); ++i) {
    written_back(params[i], p[i]);
    written_back(exp_avg[i], m[i]);
    written_back(exp_avg_sq[i], v[i]);
  }
}

}  // namespace linea
