// LayerNorm and RMSNorm over the last dim, with fused forward and backward kernels that save the
// per-row statistics. x's gradient from its other consumers, when the engine has it already (in a
// pre-norm block x is also the residual stream's), goes into the backward kernel and is added to
// dx in the same pass (autograd/node.h: record_adding), instead of in an addition of its own.
#include <utility>

#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {

// A norm's optional (C) parameter as the kernel takes it: in compute_dtype(x) (a bfloat16 one
// widened through the differentiable cast), on x's device, of shape [C].
Tensor parameter_for(const Tensor& p, const Tensor& x, const char* op, const char* what) {
  if (!p.defined()) return p;
  const DType want = compute_dtype(x.dtype());
  const Tensor q = in_compute_dtype(p, x);
  LINEA_CHECK(q.device() == x.device(), op, what, " is on another device than x: ", p.describe(), " and ",
              x.describe());
  LINEA_CHECK(q.dtype() == want, op, what, " must be ", dtype_name(want), " for ", x.describe(), ", got ",
              p.describe(), " (convert it with to(w, dtype))");
  LINEA_CHECK(q.dim() == 1 && q.size(0) == x.size(-1), op, what, " must have shape [", x.size(-1),
              "] to match the last dim of ", x.describe(), ", got ", p.describe());
  return q;
}

Shape rows_of(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 1); }

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight_, const Tensor& bias_, double eps,
                  std::optional<DType> out_dtype) {
  check_floating(x, "layer_norm");
  LINEA_CHECK(x.dim() >= 1, "layer_norm", "needs at least 1 dim, got ", x.describe());
  LINEA_CHECK(eps >= 0, "layer_norm", "eps must be non-negative, got ", eps);
  const Tensor weight = parameter_for(weight_, x, "layer_norm", "weight");
  const Tensor bias = parameter_for(bias_, x, "layer_norm", "bias");
  const DType stats = compute_dtype(x.dtype());
  Tensor y = empty(x.shape(), out_dtype.value_or(x.dtype()), x.device());
  Tensor mean = empty(rows_of(x), stats, x.device()), rstd = empty(rows_of(x), stats, x.device());
  backend_for(x).layer_norm(x, weight, bias, eps, y, mean, rstd);
  return record_adding(
      "layer_norm", {x, weight, bias}, y,
      [xs = SavedTensor(x), ws = SavedTensor(weight), ms = SavedTensor(mean), rs = SavedTensor(rstd),
       has_w = weight.defined(), has_b = bias.defined(),
       stats](const Tensor& gy, std::vector<Tensor>& waiting) -> Grads {
        const Tensor x = xs.get();
        Tensor gx = empty(x.shape(), x.dtype(), x.device());
        Tensor gw = has_w ? empty({x.size(-1)}, stats, x.device()) : Tensor();
        Tensor gb = has_b ? empty({x.size(-1)}, stats, x.device()) : Tensor();
        const Tensor also = std::exchange(waiting[0], {});  // x's gradient from its other consumers
        backend_for(x).layer_norm_backward(x, ws.get(), ms.get(), rs.get(), gy, gx, gw, gb, also);
        return {gx, gw, gb};
      });
}

Tensor rms_norm(const Tensor& x, const Tensor& weight_, double eps, std::optional<DType> out_dtype) {
  check_floating(x, "rms_norm");
  LINEA_CHECK(x.dim() >= 1, "rms_norm", "needs at least 1 dim, got ", x.describe());
  LINEA_CHECK(eps >= 0, "rms_norm", "eps must be non-negative, got ", eps);
  const Tensor weight = parameter_for(weight_, x, "rms_norm", "weight");
  const DType stats = compute_dtype(x.dtype());
  Tensor y = empty(x.shape(), out_dtype.value_or(x.dtype()), x.device());
  Tensor rstd = empty(rows_of(x), stats, x.device());
  backend_for(x).rms_norm(x, weight, eps, y, rstd);
  return record_adding("rms_norm", {x, weight}, y,
                       [xs = SavedTensor(x), ws = SavedTensor(weight), rs = SavedTensor(rstd),
                        has_w = weight.defined(), stats](const Tensor& gy, std::vector<Tensor>& waiting) -> Grads {
                         const Tensor x = xs.get();
                         Tensor gx = empty(x.shape(), x.dtype(), x.device());
                         Tensor gw = has_w ? empty({x.size(-1)}, stats, x.device()) : Tensor();
                         const Tensor also = std::exchange(waiting[0], {});  // from x's other consumers
                         backend_for(x).rms_norm_backward(x, ws.get(), rs.get(), gy, gx, gw, also);
                         return {gx, gw};
                       });
}

}  // namespace linea
