// fused_linear: a decoding step's product with its input norm, activation and residual (the
// contract is in tensor/backend_kernels.def). The op checks every input against x and the weight,
// then runs the one kernel, or the composite ops when autograd must record them or when there are
// too many rows for a matrix-vector kernel to be the better choice.
#include "autograd/ops/common.h"
#include "tensor/fused_linear_math.h"

namespace linea {

using namespace ops_detail;

namespace {

constexpr const char* kOp = "fused_linear";

// An optional member of exactly `shape`, on x's device and of x's dtype.
void check_member(const Tensor& t, const Tensor& x, const char* name, const Shape& shape) {
  if (!t.defined()) return;
  check_compatible(x, t, kOp);
  LINEA_CHECK(t.shape() == shape, kOp, name, " must have shape ", shape_str(shape), ", got ", t.describe());
}

void check_inputs(const FusedLinearInputs& in, const FusedLinearOptions& options) {
  check_defined(in.x, kOp);
  check_floating(in.x, kOp);
  LINEA_CHECK(in.x.dim() == 2, kOp, "x must be (rows, in), got ", in.x.describe());
  LINEA_CHECK(in.weight.defined() && in.weight.dim() == 2, kOp, "weight must be (out, in), got ",
              in.weight.defined() ? in.weight.describe() : std::string("none"));
  const int64_t rows = in.x.size(0), width = in.x.size(1), outputs = in.weight.size(0);
  check_member(in.weight, in.x, "weight", {outputs, width});
  check_member(in.bias, in.x, "bias", {outputs});
  check_member(in.up_weight, in.x, "up_weight", {outputs, width});
  check_member(in.up_bias, in.x, "up_bias", {outputs});
  LINEA_CHECK(in.up_weight.defined() || !in.up_bias.defined(), kOp, "up_bias given without up_weight");
  check_member(in.norm_weight, in.x, "norm_weight", {width});
  check_member(in.norm_bias, in.x, "norm_bias", {width});
  LINEA_CHECK(options.norm != RowNorm::None || (!in.norm_weight.defined() && !in.norm_bias.defined()), kOp,
              "a norm weight or bias without a norm");
  LINEA_CHECK(options.norm == RowNorm::Layer || !in.norm_bias.defined(), kOp, "only a LayerNorm has a norm bias");
  LINEA_CHECK(options.norm_eps >= 0, kOp, "norm_eps must be non-negative, got ", options.norm_eps);
  LINEA_CHECK(!options.activate || is_fusable_activation(options.activation), kOp,
              "the activation must be relu, gelu (erf or tanh) or silu");
  check_member(in.residual, in.x, "residual", {rows, outputs});
}

bool records_grad(const FusedLinearInputs& in) {
  if (!is_grad_enabled()) return false;
  for (const Tensor* t : {&in.x, &in.weight, &in.bias, &in.up_weight, &in.up_bias, &in.norm_weight, &in.norm_bias,
                          &in.residual})
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

Tensor contiguous_or_none(const Tensor& t) { return t.defined() ? contiguous(detach(t)) : t; }
Tensor rows_or_none(const Tensor& t) { return t.defined() ? contiguous_rows(detach(t)) : t; }

Tensor activated(const Tensor& x, UnaryOp activation) {
  switch (activation) {
    case UnaryOp::Relu: return relu(x);
    case UnaryOp::GeluTanh: return gelu(x, GeluApprox::Tanh);
    case UnaryOp::GeluErf: return gelu(x);
    default: return silu(x);  // checked: Silu
  }
}

}  // namespace

Tensor fused_linear_composite(const FusedLinearInputs& in, const FusedLinearOptions& options) {
  check_inputs(in, options);
  Tensor n = in.x;
  if (options.norm == RowNorm::RMS) n = rms_norm(in.x, in.norm_weight, options.norm_eps);
  if (options.norm == RowNorm::Layer) n = layer_norm(in.x, in.norm_weight, in.norm_bias, options.norm_eps);
  Tensor a = matmul(n, t(in.weight));
  if (in.bias.defined()) a = a + in.bias;
  if (options.activate) a = activated(a, options.activation);
  if (in.up_weight.defined()) {
    Tensor up = matmul(n, t(in.up_weight));
    if (in.up_bias.defined()) up = up + in.up_bias;
    a = a * up;
  }
  return in.residual.defined() ? a + in.residual : a;
}

Tensor fused_linear(const FusedLinearInputs& given, const FusedLinearOptions& options) {
  check_inputs(given, options);
  if (records_grad(given) || given.x.size(0) > kFusedLinearMaxRows) return fused_linear_composite(given, options);
  FusedLinearInputs in{.x = rows_or_none(given.x),
                       .weight = contiguous_or_none(given.weight),
                       .bias = contiguous_or_none(given.bias),
                       .up_weight = contiguous_or_none(given.up_weight),
                       .up_bias = contiguous_or_none(given.up_bias),
                       .norm_weight = contiguous_or_none(given.norm_weight),
                       .norm_bias = contiguous_or_none(given.norm_bias),
                       .residual = rows_or_none(given.residual)};
  Tensor out = empty({given.x.size(0), given.weight.size(0)}, given.x.dtype(), given.x.device());
  backend_for(given.x).fused_linear(in, options, out);
  return out;
}

}  // namespace linea
