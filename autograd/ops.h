#pragma once
// Every differentiable op. Each is defined, with what it saves and its backward, in one file of
// autograd/ops/ named after its family:
//   views.cpp      view/reshape, permute, transpose, narrow/slice, select, expand, squeeze,
//                  unsqueeze, flatten, contiguous, clone, detach, to(device/dtype), cat, stack, split
//   unary.cpp      neg, exp, log, sqrt, ..., gelu, silu, pow by scalar, clamp
//   binary.cpp     add, sub, mul, div, pow, maximum, minimum (NumPy broadcasting), comparisons
//   select.cpp     where, masked_fill, tril, triu
//   reduce.cpp     sum, mean, amax, amin, argmax, argmin, logsumexp, var, cumsum,
//                  previous_minus, sum_to
//   matmul.cpp     matmul with batch broadcasting
//   softmax.cpp    softmax, log_softmax, cross_entropy
//   norm.cpp       layer_norm, rms_norm
//   attention.cpp  scaled_dot_product_attention (fused, causal, grouped-query, sliding window)
//   rotary.cpp     rotary_embedding (fused RoPE)
//   scan.cpp       gated_linear_scan (the fused gated linear attention recurrence)
//   normalized_exp.cpp  normalized_exp (ReGLA's exp feature map with its row or running max)
//   refined_gate.cpp    refined_log_gate (ReGLA's refined gate in log space, floored)
//   indexing.cpp   index_select, gather, scatter_add, embedding
//   dropout.cpp    dropout
//   inplace.cpp    add_, mul_, fill_, copy_, ... (no autograd: for optimizers and initialisers)
//   optim.cpp      sum_squares, adamw_step_ (no autograd: the optimizer's fused kernels)
//   sample.cpp     sample_tokens (no autograd: generation's draw, on the logits' device)
//   linear_step.cpp     linear_attention_step (no autograd: a linear attention layer's decoding
//                  token in one kernel)
//   cached_attention.cpp  cached_attention_step (no autograd: softmax attention's decoding token
//                  over a KV cache written in place) and cached_attention_projected (the same
//                  with the output projection after it)
//   fused_linear.cpp  fused_linear (a decoding step's product with its input norm, activation and
//                  residual in one kernel; the composite ops under autograd)
// Errors name the op and the offending shapes, dtypes and devices (tensor/error.h).
#include <optional>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "tensor/backend.h"  // ScanAlgorithm
#include "tensor/creation.h"
#include "tensor/random.h"
#include "tensor/tensor.h"

namespace linea {

// ---- views (share storage with their input) and copies ----
Tensor view(const Tensor& x, const Shape& shape);     // one size may be -1; needs compatible strides
Tensor reshape(const Tensor& x, const Shape& shape);  // a view when possible, else a copy
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor t(const Tensor& x);  // transpose of a 2-D tensor
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// Elements start, start+step, ... below end along dim (Python slicing; negative start/end count
// from the end and are clamped). step >= 1.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);  // drops dim
Tensor expand(const Tensor& x, const Shape& shape);  // broadcast; -1 keeps a size
Tensor squeeze(const Tensor& x);                     // every size-1 dim
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor contiguous(const Tensor& x);  // x itself when already contiguous
Tensor clone(const Tensor& x);       // always a fresh copy
Tensor detach(const Tensor& x);      // same data, cut from the graph
Tensor to(const Tensor& x, Device device);
Tensor to(const Tensor& x, DType dtype);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// ---- unary elementwise ----
// Each with the derivative its backward multiplies by (autograd/ops/unary.cpp), y = f(x).
Tensor neg(const Tensor& x);    // dy/dx = -1
Tensor exp(const Tensor& x);    // y
Tensor log(const Tensor& x);    // 1 / x
Tensor sqrt(const Tensor& x);   // 1 / (2 y)
Tensor rsqrt(const Tensor& x);  // -y^3 / 2
Tensor abs(const Tensor& x);    // sign(x), 0 at the kink
Tensor sin(const Tensor& x);    // cos(x)
Tensor cos(const Tensor& x);    // -sin(x)
Tensor tanh(const Tensor& x);   // 1 - y^2
Tensor sigmoid(const Tensor& x);     // y (1 - y)
Tensor logsigmoid(const Tensor& x);  // sigmoid(-x)
Tensor softplus(const Tensor& x);    // sigmoid(x)
Tensor relu(const Tensor& x);        // [x > 0]
Tensor elu(const Tensor& x, double alpha = 1.0);  // 1 for x > 0, else alpha e^x
enum class GeluApprox { None, Tanh };  // None: exact, with erf
Tensor gelu(const Tensor& x, GeluApprox approx = GeluApprox::None);  // Phi(x) + x phi(x), or the tanh form's
Tensor silu(const Tensor& x);  // s (1 + x (1 - s)), s = sigmoid(x)
Tensor pow(const Tensor& x, double exponent);  // p x^(p - 1)
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);  // [min < x < max]
Tensor square(const Tensor& x);      // 2 x
Tensor reciprocal(const Tensor& x);  // -y^2
Tensor log1p(const Tensor& x);       // 1 / (1 + x)
Tensor expm1(const Tensor& x);       // y + 1
Tensor sign(const Tensor& x);        // piecewise constant: no gradient

// ---- binary elementwise with NumPy broadcasting; both operands of one float dtype ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);  // a > 0 where b's gradient is wanted
Tensor maximum(const Tensor& a, const Tensor& b);  // ties send the gradient half to each
Tensor minimum(const Tensor& a, const Tensor& b);
// Comparisons and logic give Bool tensors and no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);

// Scalars broadcast as 0-dim tensors of the other operand's dtype and device.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

// ---- selection and masks ----
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);  // cond Bool, broadcast
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);  // mask Bool, broadcast to x
Tensor tril(const Tensor& x, int64_t k = 0);  // zero above diagonal k of the last two dims
Tensor triu(const Tensor& x, int64_t k = 0);

// ---- reductions; dims = {} means all dims ----
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x);  // amax over everything
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // Int64, no gradient
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Variance with Bessel's correction (divide by n - correction).
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor cumsum(const Tensor& x, int64_t dim, bool reverse = false);
// y_t = x_{t-1} - x_t along dim, how much x fell from the position before (a running max's log
// decay: nn/linear_attention/key_max.cpp). x_{-1} is `before` (x's shape with size 1 along dim),
// or, undefined, x_0 itself: y_0 = 0, a constant.
Tensor previous_minus(const Tensor& x, int64_t dim, const Tensor& before = Tensor());
// Sums broadcast dims away so the result has `shape` (the adjoint of expand).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- linear algebra ----
// a (..., M, K) @ b (..., K, N) with batch broadcasting; a 1-D operand is a vector as in NumPy.
Tensor matmul(const Tensor& a, const Tensor& b);
// matmul for mixed precision (nn/precision.h): a and b (float32 or bfloat16) rounded to bfloat16,
// the products accumulated in float32, the result in `out`: float32 (never rounded to bfloat16)
// or bfloat16 (rounded once, for activations that stay bfloat16). Its gradients are such products
// too (of the gradient rounded to bfloat16), each in its operand's dtype.
Tensor matmul_bf16(const Tensor& a, const Tensor& b, DType out = kFloat32);

// ---- softmax family and losses ----
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
enum class Reduction { Mean, Sum, None };
// logits (..., C), targets (...) Int64. Mean averages over the targets that are not ignore_index.
// bfloat16 logits give a float32 loss (the log-sum-exp in float32); their gradient is bfloat16.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::Mean);

// ---- normalization over the last dim; weight and bias (C) may be undefined ----
// y has x's dtype, or out_dtype: bfloat16 from float32 x hands a float32 residual stream to
// bfloat16 products in the same pass. bfloat16 x or y: the statistics and the math are float32,
// and a bfloat16 weight or bias is widened to float32 (its gradient flows back through the cast).
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5,
                  std::optional<DType> out_dtype = {});
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6, std::optional<DType> out_dtype = {});

// ---- attention ----
// Causal softmax attention through the fused kernel (FlashAttention-style on CUDA: no T x T
// matrix in memory), equal to the composite
//   softmax(masked_fill(q k^T * scale, !allowed, -inf)) v
// with scale defaulting to 1/sqrt(dh). q (B, H, Tq, dh); k, v (B, KV, Tk, dh) with KV dividing H
// (query head h reads K/V head h / (H / KV)) and Tq <= Tk: the queries are the LAST Tq positions
// (Tq = 1 with a KV cache is decoding), so query row i sits at position Tk - Tq + i and sees key
// positions s <= Tk - Tq + i, and with window W > 0 only the last W of them. -> (B, H, Tq, dh).
// Its backward is a fused kernel too (not differentiable again). bfloat16 q, k, v: on CUDA,
// bfloat16 tensor-core products with float32 accumulation and float32 softmax statistics (the
// probabilities rounded to bfloat16 for the second product, as FlashAttention does); on the CPU,
// the float32 kernel on the widened inputs. The output and the gradients are bfloat16.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window = 0,
                                    std::optional<double> scale = {});

// ---- rotary position embedding ----
// RoPE (nn/layers/rope.h) in one fused kernel: for x (..., T, dh) and tables cos, sin (T, half)
// of the angles of row t (dim -2) and pair i < half,
//   y_i = x_i cos - x_{i+half} sin,   y_{i+half} = x_{i+half} cos + x_i sin,   y_j = x_j (j >= 2 half),
// equal to x * [cos, cos] + rotate_half(x) * [sin, sin]. y is laid out in memory like x (when x
// is dense), so transposed inputs cost no copy. Differentiable in x (the backward is the inverse
// rotation, itself differentiable); the tables are constants, float32 for bfloat16 x (bfloat16
// tables are widened).
Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin);

// ---- scan ----
// The gated linear attention recurrence through the fused kernel (tensor/backend.h: gated_scan),
// per batch element and head, from S_0 = initial_state (zeros when undefined):
//   S_t = diag(exp(gv_t)) S_{t-1} diag(exp(gk_t)) + v_t k_t^T,   o_t = S_t q_t.
// q, k (B, H, T, dk); v (B, H, T, dv); log decays gk (B, H, T, dk) or (B, H, T, 1) (one per
// step) or undefined (none), gv likewise over dv; initial_state (B, H, dv, dk). -> o (B, H, T, dv).
// Equal to nn::linear::chunked_scan and recurrent_scan (the composite forms it is tested against),
// differentiable in every input; its backward is fused kernels that recompute the states (not
// differentiable again). `algorithm` picks the backend's kernels (tensor/backend.h: the chunked
// tensor-core ones on CUDA, or the sequential ones); the CPU has one. o is laid out in memory
// like v, each gradient like its input. A bfloat16 scan has bfloat16 q, k, v (and o, and their
// gradients) with float32 log decays, initial state and S_T: the CPU computes it in float32 and
// rounds o once (the reference); CUDA's chunked kernels run its products on the bfloat16 tensor
// cores (m16n8k16) with float32 sums and states, from float32 copies of q, k, v.
Tensor gated_linear_scan(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
                         const Tensor& initial_state = Tensor(), ScanAlgorithm algorithm = ScanAlgorithm::Chunked);
// The same, also returning S_T (B, H, dv, dk), e.g. to go on decoding after a prompt. Both
// outputs are differentiable (views of one recorded result).
struct ScanResult {
  Tensor out, final_state;
};
ScanResult gated_linear_scan_with_state(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk,
                                        const Tensor& gv, const Tensor& initial_state = Tensor(),
                                        ScanAlgorithm algorithm = ScanAlgorithm::Chunked);

// ---- the linear attention layers' fused maps (nn/linear_attention) ----
// ReGLA's normalized exponential feature map through one fused kernel forward and one backward,
// per (batch b, head h) of x (B, H, T, d), float32 or float64, d >= 1:
//   RowMax (queries):  m_t = max_c x_t,c
//   PrefixMax (keys):  m_t = max over positions s <= t and features c of x_s,c, and of previous
//                      (B, H, 1, 1), a running max carried from earlier tokens (decoding goes on
//                      after a prompt), when defined (RowMax takes none)
//   features y_t,c = scale exp(x_t,c - m_t)  (B, H, T, d), laid out in memory like x;
//   max m_t  (B, H, T, 1).
// Equal to the composite exp(x - amax(x, -1)) * scale (queries) and exp(x - mu) exp(mu - m) with
// mu = amax(x, -1) and m its running max (keys: nn/linear_attention/feature_maps.h and key_max.h). Both
// results are differentiable (views of one recorded result), in x and previous; the gradient
// reaching m_t goes to the one element holding it, the earliest on ties: previous, then the
// smallest position, then the smallest feature (amax would split a tie within a token evenly).
// Its backward is a fused kernel (not differentiable again); each gradient has its input's
// memory order.
// last_max (PrefixMax only; B, H, 1, 1) is m at the last position, the running max a decoding
// state carries on with: a view of max while a gradient is recorded, else written by the kernel
// into memory of its own (so a state that keeps it does not hold the prompt's m, and needs no copy).
struct NormalizedExp {
  Tensor features, max, last_max;
};
NormalizedExp normalized_exp(const Tensor& x, NormalizedExpMode mode, double scale = 1.0,
                             const Tensor& previous = Tensor());
// ReGLA's refined gate, elementwise over a (forget) and c (refine) of one shape, float32 or
// float64: max(log f, floor) with f = g (g + 2 r (1 - g)), g = sigmoid(a), r = sigmoid(c), every
// term a log-sigmoid, finite for any finite a and c; floor = -inf for none. Equal to the composite
// clamp(nn::linear::refined_log_gate(a, c), floor) in one fused kernel forward and one backward
// (not differentiable again), with clamp's gradient: zero where the floor holds, at the floor
// included. The result is laid out in memory like a, each gradient like its input. bias_a and
// bias_c (optional, broadcast to a's shape) are added to a and c inside the kernels: the gate
// projections' biases, without a pass of their own.
Tensor refined_log_gate(const Tensor& a, const Tensor& c, double floor, const Tensor& bias_a = Tensor(),
                        const Tensor& bias_c = Tensor());

// ---- decoding (inference only: no backward) ----
// One decoding token of a gated linear attention layer in one kernel (tensor/backend_kernels.def:
// linear_attention_step has the math): the feature maps, the decays (given, or computed from the
// gate projections' pre-activations: ReGLA's refined gate, GLA's and Fast Decay's log-sigmoid
// gates), the state update, the read-out and the output RMSNorm, which
// the layer's composite step takes a dozen kernels for. in's tensors are (B, H, width) views of
// one dtype (float32 or float64) and device, any strides (rows made contiguous where they are
// not); gk, gv may have width 1. It has no backward: inputs that require grad while grad mode is
// on are an Error (decoding runs under NoGradGuard; training takes the scan).
struct LinearStepResult {
  Tensor out;      // (B, H, dv)
  Tensor state;    // (B, H, dv, dk): S after the token
  Tensor key_max;  // (B, H, 1, 1) for the normalized exp map, else undefined
};
// Where the new state goes: fresh tensors, or over in.state and in.key_max (when given) in place,
// which a decoding loop wants: no allocation, and a captured CUDA graph needs no copy back
// (train/decode_graph.cpp). In place, the given state and key max must be contiguous tensors of
// exactly (B, H, dv, dk) and (B, H, 1, 1); every other handle to them sees the new values.
enum class StateWrite { NewTensors, InPlace };
LinearStepResult linear_attention_step(const LinearStepInputs& in, const LinearStepOptions& options,
                                       StateWrite write = StateWrite::NewTensors);

// A decoding step's matrix product with what surrounds it (tensor/backend_kernels.def:
// fused_linear has the math): out = residual + act(norm(x) W^T + b) [* (norm(x) U^T + c)], x
// (N, in) -> (N, out). in's tensors share x's dtype (float32 or float64) and device; x and residual
// need contiguous rows (others are copied). With few rows (kFusedLinearMaxRows) and no gradient to
// record it is one kernel: one read of the weights, where the composite takes a norm, one or two
// products and elementwise passes. Otherwise (many rows, where a matrix product reads the weights
// once for all of them, or inputs that require grad under grad mode) it runs those composite ops,
// fused_linear_composite, which autograd records.
constexpr int64_t kFusedLinearMaxRows = 4;
Tensor fused_linear(const FusedLinearInputs& in, const FusedLinearOptions& options);
Tensor fused_linear_composite(const FusedLinearInputs& in, const FusedLinearOptions& options);

// ---- indexing ----
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);  // index 1-D Int64
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);        // index like x but along dim
// x + src added at index along dim (out of place): out[..index[i][j]..] += src[i][j].
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// weight (V, D), ids (...) Int64 -> (..., D). The gradient is summed per id in a fixed order.
Tensor embedding(const Tensor& weight, const Tensor& ids);

// ---- randomness ----
// Zeroes each element with probability p and scales the rest by 1/(1-p) when training; the mask
// comes from gen (default_generator() if null), so a seed fixes it.
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* gen = nullptr);

// ---- in place, without autograd (for optimizers, initialisers and buffers) ----
// They refuse a tensor that requires grad while grad mode is on, and bump the version counter.
Tensor& add_(Tensor& x, const Tensor& y, double alpha = 1.0);  // x += alpha * y
Tensor& mul_(Tensor& x, const Tensor& y);
Tensor& mul_(Tensor& x, double value);
Tensor& fill_(Tensor& x, double value);
Tensor& zero_(Tensor& x);
Tensor& copy_(Tensor& x, const Tensor& src);  // src broadcast to x; any dtype and device
// out += a @ b in one GEMM (beta = 1): a (..., M, K), b (..., K, N) batch-broadcast as matmul's, out
// contiguous of the product's shape and dtype. Nothing is recorded, so a and b must not need a
// gradient while grad mode is on. Inference folds a residual addition into a product with it.
Tensor& matmul_add_(Tensor& out, const Tensor& a, const Tensor& b);
// x = cond ? value : x, cond Bool broadcast to x.
Tensor& masked_fill_(Tensor& x, const Tensor& mask, double value);

// The optimizer's kernels (ops/optim.cpp), outside autograd:
// each tensor's sum of squares as a float64 tensor (one value per tensor, on their common device),
// accumulated in double, deterministic: the global gradient norm;
Tensor sum_squares(const std::vector<Tensor>& xs);
// one AdamW step in place over many parameters of one device and dtype (tensor/backend.h:
// AdamWHyper; the kernel's formula is in tensor/backend_kernels.def). Gradients are read; the
// parameters and both moment buffers are written, their versions bumped.
void adamw_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                 const std::vector<bool>& decay, const AdamWHyper& hyper);

// Generation's draw (ops/sample.cpp), outside autograd: one token id per row of logits (B, V), on
// their device, from u (B, float64, one uniform in [0, 1) per row, same device) with the
// temperature (0: greedy), top-k and top-p of `params`; tensor/backend_kernels.def states the
// rule exactly. A row that holds a NaN or +inf, or only -inf, gets -1 (the caller raises on it:
// checking here would wait for the device).
Tensor sample_tokens(const Tensor& logits, const Tensor& u, const SamplingParams& params);
// The same, drawn into `ids`, (batch) Int64 contiguous on the logits' device: a buffer a CUDA
// graph keeps (train/decode_graph.h draws each step's ids where the next replay reads them).
Tensor& sample_tokens_(Tensor& ids, const Tensor& logits, const Tensor& u, const SamplingParams& params);

// Softmax attention's decoding token over a KV cache held in place (ops/cached_attention.cpp;
// tensor/backend_kernels.def has the exact rule), outside autograd. q (B, H, dh) and the new
// token's k, v (B, KV, dh); positions (B) Int64, the tokens each row has seen; cos, sin the RoPE
// tables (L, half) or undefined; cache_k, cache_v (B, KV, C, dh). Writes the rotated key and the
// value into column positions[b] mod C, attends over the columns seen (the last C positions),
// advances positions by one, and returns (B, H, dh). scale defaults to 1/sqrt(dh). The same
// launches on CUDA whatever the position: a decoding step that keeps its shapes, so a graph can
// replay it.
Tensor cached_attention_step(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& positions, const Tensor& cos,
                             const Tensor& sin, Tensor& cache_k, Tensor& cache_v, std::optional<double> scale = {});
// The product a decoding step's attention output feeds: out = heads weight^T + bias + residual,
// with heads the step's (B, H dh) rows; weight (N, H dh), bias (N) and residual (B, N), the last
// two optional.
struct AttentionProjection {
  Tensor weight, bias, residual;
};
// cached_attention_step and that product in one call, (B, N): on CUDA at batch 1 the product's
// kernel merges the attention's per-split results itself, one launch fewer per layer. More than
// kFusedLinearMaxRows rows take the step and then fused_linear, as fused_linear would.
Tensor cached_attention_projected(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& positions,
                                  const Tensor& cos, const Tensor& sin, Tensor& cache_k, Tensor& cache_v,
                                  const AttentionProjection& projection, std::optional<double> scale = {});

// max |a - b| over two tensors of one shape (no autograd): how tests and benchmarks compare results.
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace linea
