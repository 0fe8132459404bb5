#pragma once
// The kernel set. CPU (tensor/cpu/) and CUDA (cuda/) implement the same virtual interface, and
// every op dispatches on its tensors' device through backend_for(). Kernels never allocate their
// outputs and never see autograd: ops in autograd/ check shapes and dtypes, allocate, and call
// them. Inputs may be arbitrary strided views. The elementwise kernels (fill, arange, copy,
// unary, binary, where) write through any view, so in-place ops use them; every other kernel
// writes a contiguous output (index_add and scatter_add accumulate into one), except rotary,
// attention and normalized_exp, whose outputs may be any view with a contiguous last dim
// (autograd gives them the memory order of their inputs), and refined_log_gate, elementwise.
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace linea {

enum class UnaryOp {
  Neg, Exp, Log, Sqrt, Rsqrt, Abs, Sin, Cos, Tanh, Sigmoid, LogSigmoid, Softplus, Relu, Elu,
  GeluTanh, GeluErf, Silu, Pow, Clamp, Sign, Reciprocal, Square, Log1p, Expm1, Erf,
  // Derivative helpers used by backward formulas (elementwise, no autograd of their own):
  Step,          // x > 0 ? 1 : 0
  GeluTanhGrad,  // d gelu_tanh / dx
  GeluErfGrad,   // d gelu_erf / dx
  EluGrad,       // d elu / dx
};

// Extra parameters of a unary op: Pow uses a (exponent); Clamp uses a (min) and b (max);
// Elu and EluGrad use a (alpha).
struct UnaryArgs {
  double a = 0.0;
  double b = 0.0;
};

enum class BinaryOp { Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge, And, Or };

inline bool is_comparison(BinaryOp op) {
  return op == BinaryOp::Eq || op == BinaryOp::Ne || op == BinaryOp::Lt || op == BinaryOp::Le ||
         op == BinaryOp::Gt || op == BinaryOp::Ge;
}

enum class ReduceOp { Sum, Max, Min, ArgMax, ArgMin };

// Which max normalized_exp (below) subtracts: each token's own (ReGLA's queries), or the running
// max over the token and every one before it (ReGLA's causal key max).
enum class NormalizedExpMode { RowMax, PrefixMax };

// How a backend computes the gated scan (gated_scan below). Both give the same result up to
// rounding; they differ in how the work is ordered:
//   Chunked     time in chunks: matrix products within a chunk and a short sequential pass over
//               chunks (cuda/kernels/chunked_scan.cu, on the tensor cores for float32 with TF32);
//   Sequential  one step at a time with the state in fast memory (the CPU kernel, and
//               cuda/kernels/gated_scan.cu).
// The CPU has the sequential kernel only and runs it for either.
enum class ScanAlgorithm { Chunked, Sequential };

class Backend {
 public:
  virtual ~Backend() = default;

  // out[...] = value (converted to out's dtype).
  virtual void fill(const Tensor& out, double value) const = 0;
  // out[i] = start + i * step over a 1-D contiguous out.
  virtual void arange(const Tensor& out, double start, double step) const = 0;
  // dst = src, elementwise; src has dst's shape (possibly through stride-0 broadcast dims) and
  // any dtype: values are converted. Both on this backend's device.
  virtual void copy(const Tensor& src, const Tensor& dst) const = 0;

  // Elementwise. Inputs already have out's shape (expanded with stride 0 where broadcast).
  virtual void unary(UnaryOp op, const Tensor& in, const Tensor& out, UnaryArgs args) const = 0;
  // out = dy * derivative(x) for one of the derivative helpers (Step, GeluTanhGrad, GeluErfGrad,
  // EluGrad): an activation's backward in one pass over memory instead of two.
  virtual void unary_grad(UnaryOp derivative, const Tensor& x, const Tensor& dy, const Tensor& out,
                          UnaryArgs args) const = 0;
  // Comparisons write Bool; And/Or take Bool; everything else takes and writes one float dtype.
  virtual void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) const = 0;
  // out = cond ? a : b, cond Bool.
  virtual void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) const = 0;

  // Reduces `in` over `dims` (sorted, unique) into out, which has in's shape with those dims set
  // to 1. ArgMax/ArgMin reduce exactly one dim and write Int64 positions along it.
  virtual void reduce(ReduceOp op, const Tensor& in, const std::vector<int64_t>& dims,
                      const Tensor& out) const = 0;
  // Inclusive prefix sum along dim; reverse = suffix sum.
  virtual void cumsum(const Tensor& in, int64_t dim, bool reverse, const Tensor& out) const = 0;

  // out = a @ b for a (..., M, K), b (..., K, N), out (..., M, N); the batch dims of a and b are
  // already expanded to out's batch shape (stride 0 where broadcast).
  virtual void matmul(const Tensor& a, const Tensor& b, const Tensor& out) const = 0;

  // Indexing. index is Int64 and is bounds-checked by the kernel (an Error, never a crash).
  // out = in.index_select(dim, index): out.shape[dim] = index.numel().
  virtual void index_select(const Tensor& in, int64_t dim, const Tensor& index,
                            const Tensor& out) const = 0;
  // out[..., index[i], ...] += src[..., i, ...] along dim (the adjoint of index_select).
  virtual void index_add(const Tensor& out, int64_t dim, const Tensor& index,
                         const Tensor& src) const = 0;
  // out[i][j] = in[i][index[i][j]] (dim 1 shown); index and out have one shape.
  virtual void gather(const Tensor& in, int64_t dim, const Tensor& index, const Tensor& out) const = 0;
  // out[i][index[i][j]] += src[i][j] (dim 1 shown), in a fixed order (deterministic).
  virtual void scatter_add(const Tensor& out, int64_t dim, const Tensor& index,
                           const Tensor& src) const = 0;

  // Fused kernels of the hot paths; each is tested against its composite version.
  // y = softmax(x) (or log_softmax) along dim.
  virtual void softmax(const Tensor& x, int64_t dim, bool log, const Tensor& y) const = 0;
  // forward was y = softmax(x): dx = y * (dy - sum(dy * y));  log: dx = dy - exp(y) * sum(dy).
  virtual void softmax_backward(const Tensor& y, const Tensor& dy, int64_t dim, bool log,
                                const Tensor& dx) const = 0;
  // logits (N, C), targets (N) Int64. losses (N) gets -log softmax(logits)[target] (0 where the
  // target is ignore_index) and lse (N) the logsumexp of each row, saved for backward.
  virtual void cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                             const Tensor& losses, const Tensor& lse) const = 0;
  // dlogits = (softmax(logits) - onehot(target)) * dloss[n] (0 on ignored rows).
  virtual void cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                                      int64_t ignore_index, const Tensor& lse,
                                      const Tensor& dloss, const Tensor& dlogits) const = 0;
  // Normalization over the last dim of x viewed as (rows, C). weight/bias (C) may be undefined.
  // mean and rstd (rows) are saved for backward (rms_norm has no mean).
  virtual void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                          const Tensor& y, const Tensor& mean, const Tensor& rstd) const = 0;
  virtual void layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean,
                                   const Tensor& rstd, const Tensor& dy, const Tensor& dx,
                                   const Tensor& dweight, const Tensor& dbias) const = 0;
  virtual void rms_norm(const Tensor& x, const Tensor& weight, double eps, const Tensor& y,
                        const Tensor& rstd) const = 0;
  virtual void rms_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& rstd,
                                 const Tensor& dy, const Tensor& dx, const Tensor& dweight) const = 0;

  // Rotary position embedding (nn/layers/rope.h): x and y (..., T, dh) with a contiguous last dim
  // (any strides before it; y is written through its view), cos and sin (T, half) with contiguous
  // rows. With x1, x2 the first two blocks of half dims of x (y1, y2 of y) and t the row's index
  // along dim -2:  y1 = x1 cos[t] - x2 sin[t],  y2 = x2 cos[t] + x1 sin[t];  the dims past 2 half
  // are copied. inverse (sin -> -sin) is the backward, as the rotation is orthogonal.
  virtual void rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& y) const = 0;

  // Causal softmax attention in the FlashAttention manner (no T x T matrix in memory).
  // q (B, H, Tq, dh); k, v (B, KV, Tk, dh) with KV dividing H (query head h reads K/V head
  // h / (H / KV)); query row i sits at position Tk - Tq + i, so it sees key positions
  // s <= Tk - Tq + i, and with window > 0 only s > Tk - Tq + i - window. out (B, H, Tq, dh) with a
  // contiguous last dim and any other strides (written through them); lse (B, H, Tq), contiguous,
  // receives each row's logsumexp of the scaled scores, saved for backward.
  virtual void attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, int64_t window,
                         const Tensor& out, const Tensor& lse) const = 0;
  // The gradients of attention given dout; dq, dk, dv have q's, k's, v's shapes, a contiguous last
  // dim and any other strides.
  virtual void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                  const Tensor& lse, const Tensor& dout, double scale, int64_t window,
                                  const Tensor& dq, const Tensor& dk, const Tensor& dv) const = 0;

  // ReGLA's normalized exponential feature map (autograd/ops.h: normalized_exp). x (B, H, T, d)
  // with a contiguous last dim (any other strides), d >= 1 and B H T >= 1; per (b, h):
  //   RowMax:     m_t = max_c x_t,c
  //   PrefixMax:  m_t = max(previous, max over s <= t and all c of x_s,c)   (previous: (B, H, 1, 1),
  //               contiguous, or undefined: none)
  //   y_t,c = scale exp(x_t,c - m_t).
  // y has x's shape, a contiguous last dim and any other strides (written through them); m
  // (B, H, T, 1) is contiguous. A NaN in a max's operands makes it NaN.
  virtual void normalized_exp(const Tensor& x, NormalizedExpMode mode, double scale, const Tensor& previous,
                              const Tensor& y, const Tensor& m) const = 0;
  // forward was y_t,c = scale exp(x_t,c - m_t) with m_t one element of x (or previous), so
  //   dx_t,c = y_t,c dy_t,c,  and  g_t = dm_t - sum_c y_t,c dy_t,c  reaches that element:
  // for RowMax the first c of row t holding m_t; for PrefixMax the first c of the earliest row
  // s <= t whose row max is m_t, or previous when it holds m_t (ties go to the earliest: previous,
  // then the smallest s, then the smallest c). x, y, m, previous are the forward's; dy and dx have
  // x's shape with a contiguous last dim (any other strides), dm (B, H, T, 1) is contiguous;
  // dprevious (B, H, 1, 1), contiguous, gets the sum of the g_t that reach previous, or is
  // undefined (not wanted; then previous may be too).
  virtual void normalized_exp_backward(const Tensor& x, const Tensor& y, const Tensor& m, const Tensor& previous,
                                       const Tensor& dy, const Tensor& dm, NormalizedExpMode mode, const Tensor& dx,
                                       const Tensor& dprevious) const = 0;

  // ReGLA's refined gate (autograd/ops.h: refined_log_gate), elementwise over a and c of one shape
  // (any strides): out = max(log f, floor), f = g (g + 2 r (1 - g)), g = sigmoid(a), r = sigmoid(c),
  // every term a log-sigmoid (tensor/scalar_math.h: refined_log_gate). out any view of that shape.
  virtual void refined_log_gate(const Tensor& a, const Tensor& c, double floor, const Tensor& out) const = 0;
  // da = dout d(log f)/da and dc = dout d(log f)/dc where log f > floor, 0 where the floor holds
  // (clamp's convention); da and dc any views of a's shape.
  virtual void refined_log_gate_backward(const Tensor& a, const Tensor& c, double floor, const Tensor& dout,
                                         const Tensor& da, const Tensor& dc) const = 0;

  // The gated linear attention recurrence (nn/linear/scan.h), sequential in time per (batch,
  // head) with the dv x dk state kept in fast memory, instead of the chunked scan's many small
  // ops. With Dv_t = diag(exp(gv_t)) and Dk_t = diag(exp(gk_t)):
  //   S_0 = initial_state,  S_t = Dv_t S_{t-1} Dk_t + v_t k_t^T,  o_t = S_t q_t   (t = 1..T).
  // q, k (B, H, T, dk); v (B, H, T, dv); the log decays gk (B, H, T, dk) or (B, H, T, 1) (one per
  // step) or undefined (none), gv likewise over dv; initial_state (B, H, dv, dk) or undefined
  // (zeros). out (B, H, T, dv) with a contiguous last dim (any other strides); final_state
  // (B, H, dv, dk), contiguous, receives S_T, or is undefined (not wanted). The caller passes T, dk,
  // dv, B * H >= 1 (autograd/ops/scan.cpp handles empty shapes).
  virtual void gated_scan(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
                          const Tensor& initial_state, const Tensor& out, const Tensor& final_state,
                          ScanAlgorithm algorithm) const = 0;
  // forward was S_t = Dv_t S_{t-1} Dk_t + v_t k_t^T, o_t = S_t q_t, so with G_t = dL/dS_t, which
  // gathers everything that reaches S_t from the future,
  //   G_T = dfinal_state + do_T q_T^T,   G_t = do_t q_t^T + Dv_{t+1} G_{t+1} Dk_{t+1},
  //   dq_t = S_t^T do_t,   dv_t = G_t k_t,   dk_t = G_t^T v_t,   d initial_state = Dv_1 G_1 Dk_1,
  // and as S_t[i,j] depends on gv_t[i] and gk_t[j] only through P_t = Dv_t S_{t-1} Dk_t,
  //   dgv_t[i] = sum_j G_t[i,j] P_t[i,j],   dgk_t[j] = sum_i G_t[i,j] P_t[i,j]
  // (a scalar decay sums both: sum_ij G_t P_t). The states are recomputed from the inputs (chunk
  // checkpoints, then each chunk's states again): nothing from the forward is saved. dfinal_state
  // undefined means zero; dq .. dinitial_state have their inputs' shapes (dq .. dgv a contiguous
  // last dim, dinitial_state contiguous), and are undefined where not wanted (then not written).
  virtual void gated_scan_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk,
                                   const Tensor& gv, const Tensor& initial_state, const Tensor& dout,
                                   const Tensor& dfinal_state, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                   const Tensor& dgk, const Tensor& dgv, const Tensor& dinitial_state,
                                   ScanAlgorithm algorithm) const = 0;

  // out (float64, one per tensor) gets each tensor's sum of squares, accumulated in double in an
  // order fixed by the sizes (deterministic), reading every tensor once: the global gradient norm
  // of clipping without a cast, a square and a reduction per parameter.
  virtual void sum_squares(const std::vector<Tensor>& xs, const Tensor& out) const = 0;

  // One AdamW step over many parameters at once (few launches on a GPU), in place:
  //   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
  //   p -= lr * (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd_i * p)
  // with wd_i = weight_decay for the parameters whose decay flag is set, 0 for the others.
  struct AdamWHyper {
    double lr, beta1, beta2, eps, weight_decay;
    int64_t step;  // t, from 1
  };
  virtual void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                          const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                          const std::vector<bool>& decay, const AdamWHyper& hyper) const = 0;

  // Counter-based random numbers (Philox 4x32-10, tensor/philox.h): element i of out gets the
  // number at counter offset + i of the stream `seed`, so CPU and CUDA draw the same values.
  virtual void uniform(const Tensor& out, uint64_t seed, uint64_t offset, double low,
                       double high) const = 0;
  virtual void normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean,
                      double stddev) const = 0;
};

// The backend of a device. CUDA without a CUDA build, or without a GPU, is an Error.
const Backend& backend_for(Device device);
inline const Backend& backend_for(const Tensor& t) { return backend_for(t.device()); }

}  // namespace linea
