// In-place ops, outside autograd: optimizers, initialisers and buffers use them. Each bumps the
// version counter, so a tensor saved for a backward that is still to come cannot be overwritten
// silently.
#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {
void check_writable(const Tensor& x, const char* op) {
  check_defined(x, op);
  LINEA_CHECK(!(is_grad_enabled() && x.requires_grad()), op, "cannot modify ", x.describe(),
              " in place: it requires grad and grad mode is on (wrap the update in NoGradGuard, "
              "or use the out-of-place op)");
}
}  // namespace

Tensor& add_(Tensor& x, const Tensor& y, double alpha) {
  check_writable(x, "add_");
  check_compatible(x, y, "add_");
  const Tensor b = broadcast_view(alpha == 1.0 ? y : detach(y) * alpha, x.shape(), "add_");
  backend_for(x).binary(BinaryOp::Add, x, b, x);
  x.bump_version();
  return x;
}

Tensor& mul_(Tensor& x, const Tensor& y) {
  check_writable(x, "mul_");
  check_compatible(x, y, "mul_");
  backend_for(x).binary(BinaryOp::Mul, x, broadcast_view(y, x.shape(), "mul_"), x);
  x.bump_version();
  return x;
}

Tensor& mul_(Tensor& x, double value) {
  check_writable(x, "mul_");
  check_floating(x, "mul_");
  return mul_(x, scalar_like(value, x));
}

Tensor& fill_(Tensor& x, double value) {
  check_writable(x, "fill_");
  backend_for(x).fill(x, value);
  x.bump_version();
  return x;
}

Tensor& zero_(Tensor& x) { return fill_(x, 0.0); }

Tensor& copy_(Tensor& x, const Tensor& src) {
  check_writable(x, "copy_");
  check_defined(src, "copy_");
  copy_into(x, src);  // bumps the version
  return x;
}

Tensor& masked_fill_(Tensor& x, const Tensor& mask, double value) {
  check_writable(x, "masked_fill_");
  LINEA_CHECK(mask.defined() && mask.dtype() == kBool, "masked_fill_", "the mask must be bool, got ", mask.describe());
  backend_for(x).where(broadcast_view(mask, x.shape(), "masked_fill_"), broadcast_view(scalar_like(value, x), x.shape(), "masked_fill_"), x, x);
  x.bump_version();
  return x;
}

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

double max_abs_diff(const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  check_compatible(a, b, "max_abs_diff");
  if (a.numel() == 0 && b.numel() == 0) return 0.0;
  return amax(abs(a - b)).item();
}

}  // namespace linea
