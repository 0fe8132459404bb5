// The gated linear attention recurrence as one differentiable op over two fused kernels
// (tensor/backend.h: gated_scan, gated_scan_backward), instead of the composite chunked scan of
// nn/linear_attention/scan.cpp with its dozens of small ops per chunk and their saved intermediates
// (tests/autograd/gated_scan_test.cpp checks the two, and the recurrent form, against each other).
// It saves only its inputs: the backward recomputes the states.
//
// The backward's derivation. Forward: S_t = Dv_t S_{t-1} Dk_t + v_t k_t^T, o_t = S_t q_t, with
// Dv_t = diag(exp(gv_t)), Dk_t = diag(exp(gk_t)). Let G_t = dL/dS_t, which gathers everything that
// reaches S_t from the future:
//   G_T = dfinal_state + do_T q_T^T,   G_t = do_t q_t^T + Dv_{t+1} G_{t+1} Dk_{t+1},
//   dq_t = S_t^T do_t,   dv_t = G_t k_t,   dk_t = G_t^T v_t,   d initial_state = Dv_1 G_1 Dk_1,
// and as S_t[i,j] depends on gv_t[i] and gk_t[j] only through P_t = Dv_t S_{t-1} Dk_t,
//   dgv_t[i] = sum_j G_t[i,j] P_t[i,j],   dgk_t[j] = sum_i G_t[i,j] P_t[i,j]
// (a scalar decay sums both: sum_ij G_t P_t). The CPU kernel walks this backwards in time from
// state checkpoints (cpu/gated_scan.cpp); the chunked CUDA kernels use its chunked form
// (cuda/kernels/chunked_scan_kernels.cuh).
#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {

// The dtype of the decays and the recurrent state: float32 for a bfloat16 scan, q's otherwise.
DType state_dtype(const Tensor& q) { return q.dtype() == kBFloat16 ? kFloat32 : q.dtype(); }

void check_scan_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk,
                       const Tensor& gv, const Tensor& s0) {
  check_floating(q, op);
  check_compatible(q, k, op);
  check_compatible(q, v, op);
  // A bfloat16 scan has bfloat16 activations (q, k, v) and float32 decays and states.
  for (const Tensor* x : {&gk, &gv, &s0})
    if (x->defined())
      LINEA_CHECK(x->device() == q.device() && x->dtype() == state_dtype(q), op,
                  "the decays and the initial state must be ", dtype_name(state_dtype(q)), " on ",
                  q.device().str(), " for q ", q.describe(), ", got ", x->describe(),
                  q.dtype() == kBFloat16 ? " (a bfloat16 scan keeps its decays and states in float32)" : "");
  LINEA_CHECK(q.dim() == 4, op, "q must be (B, H, T, dk), got ", q.describe());
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), dk = q.size(3);
  LINEA_CHECK(k.shape() == q.shape(), op, "k must have q's shape (B, H, T, dk), got q ", q.describe(), " and k ",
              k.describe());
  LINEA_CHECK(v.dim() == 4 && v.size(0) == B && v.size(1) == H && v.size(2) == T, op,
              "v must be (B, H, T, dv) with q's B, H, T, got q ", q.describe(), " and v ", v.describe());
  const int64_t dv = v.size(3);
  // A log decay has the shape of q (gk) or v (gv), or a last dim of 1: one decay per step.
  auto check_decay = [&](const Tensor& g, const char* name, int64_t width, const char* like) {
    if (!g.defined()) return;
    LINEA_CHECK(g.dim() == 4 && g.size(0) == B && g.size(1) == H && g.size(2) == T &&
                    (g.size(3) == width || g.size(3) == 1),
                op, name, " must be (", B, ", ", H, ", ", T, ", ", width, ") like ", like, ", or (", B, ", ", H, ", ",
                T, ", 1) for one decay per step, got ", g.describe());
  };
  check_decay(gk, "gk", dk, "q");
  check_decay(gv, "gv", dv, "v");
  LINEA_CHECK(!s0.defined() || s0.shape() == Shape({B, H, dv, dk}), op, "initial_state must be (B, H, dv, dk) = (",
              B, ", ", H, ", ", dv, ", ", dk, ") for q ", q.describe(), " and v ", v.describe(), ", got ",
              s0.describe());
}

// Runs the forward kernel into out (B, H, T, dv) and, when defined, final_state (B, H, dv, dk);
// with a backward to come, `kept` receives what the backend keeps for it (the chunked CUDA scan:
// the states before every chunk, so that its backward does not compute them again).
void scan_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
                  const Tensor& s0, Tensor& out, Tensor& final_state, ScanAlgorithm algorithm, Tensor* kept) {
  if (q.numel() > 0 && v.numel() > 0) {
    backend_for(q).gated_scan(q, k, v, gk, gv, s0, out, final_state, algorithm, kept);
    return;
  }
  // No step, or an empty state (dk or dv of 0): o is a sum over nothing, and S_T = S_0 where the
  // state has any elements at all (T = 0).
  fill_(out, 0.0);
  if (!final_state.defined()) return;
  if (s0.defined()) copy_(final_state, s0);
  else fill_(final_state, 0.0);
}

// The inputs, saved for backward, which of them want a gradient, where those gradients may be
// written (autograd/node.h: GradientHome; a linear attention layer's v, split off its stacked
// projections), the algorithm, and what the forward kept for the backward (undefined: nothing).
struct Saved {
  SavedTensor q, k, v, gk, gv, s0, kept;
  bool need[6];
  std::shared_ptr<autograd::GradientHome> home[5];
  ScanAlgorithm algorithm;

  Saved(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& gk_, const Tensor& gv_, const Tensor& s0_,
        ScanAlgorithm algorithm_, const Tensor& kept_)
      : q(q_), k(k_), v(v_), gk(gk_), gv(gv_), s0(s0_), kept(kept_), algorithm(algorithm_) {
    const Tensor* all[6] = {&q_, &k_, &v_, &gk_, &gv_, &s0_};
    for (int i = 0; i < 6; ++i) need[i] = all[i]->defined() && all[i]->requires_grad();
    for (int i = 0; i < 5; ++i) home[i] = autograd::gradient_home(*all[i]);
  }
};

// The gradients of (q, k, v, gk, gv, initial_state) given dout and dfinal (undefined: zero);
// undefined where not wanted. Each has its input's memory order (the initial state's is
// contiguous).
Grads scan_backward(const Saved& saved, const Tensor& dout, const Tensor& dfinal) {
  const Tensor inputs[6] = {saved.q.get(),  saved.k.get(),  saved.v.get(),
                            saved.gk.get(), saved.gv.get(), saved.s0.get()};
  Grads g(6);
  for (int i = 0; i < 6; ++i) {
    if (!saved.need[i]) continue;
    const Tensor& x = inputs[i];
    g[i] = i == 5 ? empty(x.shape(), x.dtype(), x.device()) : gradient_buffer(saved.home[i], x);
  }
  const Tensor &q = inputs[0], &v = inputs[2];
  if (q.numel() > 0 && v.numel() > 0) {
    backend_for(q).gated_scan_backward(q, inputs[1], v, inputs[3], inputs[4], inputs[5], dout, dfinal, g[0], g[1],
                                       g[2], g[3], g[4], g[5], saved.algorithm, saved.kept.get());
    return g;
  }
  // Empty shapes (see scan_forward): every gradient is a sum over nothing, except that with
  // T = 0 the final state is the initial one.
  for (Tensor& x : g)
    if (x.defined()) fill_(x, 0.0);
  if (g[5].defined() && dfinal.defined()) copy_(g[5], dfinal);
  return g;
}

}  // namespace

// q, k (B,H,T,dk), v (B,H,T,dv), gk (B,H,T,dk|1), gv (B,H,T,dv|1), initial_state (B,H,dv,dk)
// -> o (B,H,T,dv), laid out in memory like v (the layers pass (B,T,H,dv) projections seen as
// (B,H,T,dv): the heads merge again without a copy).
Tensor gated_linear_scan(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
                         const Tensor& initial_state, ScanAlgorithm algorithm) {
  const char* op = "gated_linear_scan";
  check_scan_inputs(op, q, k, v, gk, gv, initial_state);
  Tensor out = empty_like_order(v), no_final, kept;
  const bool backward = autograd::needs_grad({q, k, v, gk, gv, initial_state});
  scan_forward(q, k, v, gk, gv, initial_state, out, no_final, algorithm, backward ? &kept : nullptr);
  return record(op, {q, k, v, gk, gv, initial_state}, out,
                [saved = Saved(q, k, v, gk, gv, initial_state, algorithm, kept)](const Tensor& gout) -> Grads {
                  return scan_backward(saved, gout, Tensor());
                });
}

// o and S_T are the two outputs of one node (autograd/node.h: record_outputs): a gradient that
// reaches only one of them arrives alone, the other undefined (a final state nobody reads costs
// its backward nothing; an output nobody reads is given as zeros, which the kernels need).
ScanResult gated_linear_scan_with_state(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk,
                                        const Tensor& gv, const Tensor& initial_state, ScanAlgorithm algorithm) {
  const char* op = "gated_linear_scan";
  check_scan_inputs(op, q, k, v, gk, gv, initial_state);
  const Shape out_shape{q.size(0), q.size(1), q.size(2), v.size(3)};
  const Shape state_shape{q.size(0), q.size(1), v.size(3), q.size(3)};
  Tensor out = empty_in_order_of(out_shape, v.strides(), q.dtype(), q.device());
  Tensor final_state = empty(state_shape, state_dtype(q), q.device()), kept;
  const bool backward = autograd::needs_grad({q, k, v, gk, gv, initial_state});
  scan_forward(q, k, v, gk, gv, initial_state, out, final_state, algorithm, backward ? &kept : nullptr);
  const std::vector<Tensor> results = record_outputs(
      op, {q, k, v, gk, gv, initial_state}, {out, final_state},
      [saved = Saved(q, k, v, gk, gv, initial_state, algorithm, kept), out_shape,
       v_strides = v.strides(), out_dtype = q.dtype()](const std::vector<Tensor>& g) -> Grads {
        Tensor dout = g[0];
        if (!dout.defined()) {
          dout = empty_in_order_of(out_shape, v_strides, out_dtype, g[1].device());
          fill_(dout, 0.0);
        }
        return scan_backward(saved, dout, g[1]);
      });
  return {results[0], results[1]};
}

}  // namespace linea
