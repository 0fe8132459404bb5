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

}  // namespace linea
