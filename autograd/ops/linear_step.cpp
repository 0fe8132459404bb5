// linear_attention_step: a linear attention layer's decoding token in one kernel (the contract
// is in tensor/backend_kernels.def). The op checks every input against q's batch, heads and dtype
// and device, gives the kernel contiguous rows, and allocates the results; nothing is recorded,
// since the op has no backward.
#include <cmath>
#include <string>

#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {

constexpr const char* kOp = "linear_attention_step";

// A (B, H, width) member named `name`: on q's device, of q's dtype, with q's batch and heads, of
// one of the widths allowed (0 in `widths` means any), rows contiguous.
Tensor head_rows(const Tensor& t, const Tensor& q, const char* name, std::initializer_list<int64_t> widths) {
  if (!t.defined()) return t;
  check_compatible(q, t, kOp);
  LINEA_CHECK(t.dim() == 3 && t.size(0) == q.size(0) && t.size(1) == q.size(1), kOp, name, " must be (B, H, width) with q's ",
              "B = ", q.size(0), " and H = ", q.size(1), ", got ", t.describe());
  bool fits = false;
  std::string allowed;
  for (int64_t w : widths) {
    fits = fits || w == 0 || t.size(2) == w;
    allowed += (allowed.empty() ? "" : " or ") + std::to_string(w);
  }
  LINEA_CHECK(fits, kOp, name, " must have width ", allowed, ", got ", t.describe());
  return contiguous_rows(t);
}

// A member that must be contiguous of exactly `shape`.
Tensor exact(const Tensor& t, const Tensor& q, const char* name, const Shape& shape) {
  if (!t.defined()) return t;
  check_compatible(q, t, kOp);
  LINEA_CHECK(t.shape() == shape, kOp, name, " must have shape ", shape_str(shape), ", got ", t.describe());
  return contiguous(detach(t));
}

void check_inference_only(const LinearStepInputs& in) {
  if (!is_grad_enabled()) return;
  for (const Tensor* t : {&in.q, &in.k, &in.v, &in.gk, &in.gv, &in.gate_a, &in.gate_c, &in.gate_bias_a,
                          &in.gate_bias_c, &in.key_gate, &in.value_gate, &in.key_gate_bias, &in.value_gate_bias,
                          &in.key_max, &in.state, &in.norm_weight})
    LINEA_CHECK(!t->defined() || !t->requires_grad(), kOp,
                "has no backward (a decoding step): run it under NoGradGuard, or with inputs that do not require grad");
}

}  // namespace

LinearStepResult linear_attention_step(const LinearStepInputs& given, const LinearStepOptions& options,
                                       StateWrite write) {
  check_defined(given.q, kOp);
  check_floating(given.q, kOp);
  LINEA_CHECK(given.q.dim() == 3 && given.q.numel() > 0, kOp, "q must be (B, H, dk) and non-empty, got ",
              given.q.describe());
  LINEA_CHECK(given.k.defined() && given.v.defined() && given.state.defined(), kOp, "needs q, k, v and the state");
  check_inference_only(given);
  const int64_t B = given.q.size(0), H = given.q.size(1), dk = given.q.size(2), dv = given.v.size(-1);
  LINEA_CHECK(given.gate_a.defined() == given.gate_c.defined(), kOp,
              "the refined gate needs both pre-activations (gate_a and gate_c), or neither");
  LINEA_CHECK(given.gate_a.defined() || (!given.gate_bias_a.defined() && !given.gate_bias_c.defined()), kOp,
              "gate biases given without the gate's pre-activations");
  LINEA_CHECK(!std::isnan(options.gate_floor) && options.gate_floor < INFINITY, kOp,
              "gate_floor must be a number below +inf (-inf: none), got ", options.gate_floor);
  LINEA_CHECK(options.norm_eps >= 0, kOp, "norm_eps must be >= 0, got ", options.norm_eps);
  LINEA_CHECK(options.gate_normalizer > 0, kOp, "gate_normalizer must be positive, got ", options.gate_normalizer);
  LINEA_CHECK(given.key_gate.defined() || !given.key_gate_bias.defined(), kOp, "key_gate_bias given without key_gate");
  LINEA_CHECK(given.value_gate.defined() || !given.value_gate_bias.defined(), kOp,
              "value_gate_bias given without value_gate");
  const bool normalized_exp = options.map == StepFeatureMap::NormalizedExp;
  LINEA_CHECK(normalized_exp || !given.key_max.defined(), kOp, "a running key max only goes with the normalized exp map");
  LINEA_CHECK(options.output_norm || !given.norm_weight.defined(), kOp, "a norm weight without output_norm");

  const int64_t gate_width = options.refined_gate_on_keys ? dk : dv;
  LinearStepInputs in;
  in.q = head_rows(given.q, given.q, "q", {dk});
  in.k = head_rows(given.k, given.q, "k", {dk});
  in.v = head_rows(given.v, given.q, "v", {0});
  in.gk = head_rows(given.gk, given.q, "gk", {dk, 1});
  in.gv = head_rows(given.gv, given.q, "gv", {dv, 1});
  in.gate_a = head_rows(given.gate_a, given.q, "gate_a", {gate_width});
  in.gate_c = head_rows(given.gate_c, given.q, "gate_c", {gate_width});
  in.gate_bias_a = exact(given.gate_bias_a, given.q, "gate_bias_a", {H * gate_width});
  in.gate_bias_c = exact(given.gate_bias_c, given.q, "gate_bias_c", {H * gate_width});
  in.key_gate = head_rows(given.key_gate, given.q, "key_gate", {dk});
  in.value_gate = head_rows(given.value_gate, given.q, "value_gate", {dv});
  in.key_gate_bias = exact(given.key_gate_bias, given.q, "key_gate_bias", {H * dk});
  in.value_gate_bias = exact(given.value_gate_bias, given.q, "value_gate_bias", {H * dv});
  in.key_max = exact(given.key_max, given.q, "key_max", {B, H, 1, 1});
  in.state = exact(given.state, given.q, "state", {B, H, dv, dk});
  in.norm_weight = exact(given.norm_weight, given.q, "norm_weight", {dv});

  const DType dtype = given.q.dtype();
  const Device device = given.q.device();
  const bool in_place = write == StateWrite::InPlace;
  if (in_place) {
    // exact() copied them only if they were not contiguous: then there is nothing to write over.
    LINEA_CHECK(in.state.raw_data() == given.state.raw_data() && !given.state.requires_grad(), kOp,
                "updates the state in place only in a contiguous tensor that does not require grad, got ",
                given.state.describe());
    LINEA_CHECK(!given.key_max.defined() ||
                    (in.key_max.raw_data() == given.key_max.raw_data() && !given.key_max.requires_grad()),
                kOp, "updates the key max in place only in a contiguous tensor that does not require grad, got ",
                given.key_max.describe());
  }
  LinearStepResult result{.out = empty({B, H, dv}, dtype, device),
                          .state = in_place ? given.state : empty({B, H, dv, dk}, dtype, device),
                          .key_max = Tensor()};
  if (normalized_exp)
    result.key_max = in_place && given.key_max.defined() ? given.key_max : empty({B, H, 1, 1}, dtype, device);
  backend_for(given.q).linear_attention_step(in, options, result.out, result.state, result.key_max);
  return result;
}

}  // namespace linea
