// Dropout: y = x * mask / (1 - p) with mask ~ Bernoulli(1 - p) drawn from a seeded generator.
#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check_floating(x, "dropout");
  LINEA_CHECK(p >= 0.0 && p <= 1.0, "dropout", "p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0.0;
  // keep = [u >= p] for u uniform in [0, 1); the scaled mask is the op's only saved state, and
  // since the product is composite its gradient is gy * mask / (1 - p).
  const Tensor u = uniform(x.shape(), 0.0, 1.0, {x.dtype(), x.device()}, gen);
  const Tensor keep = to(ge(u, scalar_like(p, u)), x.dtype());
  return x * (keep * (1.0 / (1.0 - p)));
}

}  // namespace linea
