#pragma once
// The kernel set. CPU (cpu/) and CUDA (cuda/) implement the same virtual interface, and
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
//               chunks (cuda/kernels/chunked_scan.cu, on the tensor cores: TF32 for float32 with
//               TF32 on, bfloat16 for a bfloat16 scan);
//   Sequential  one step at a time with the state in fast memory (the CPU kernel, and
//               cuda/kernels/gated_scan.cu).
// The CPU has the sequential kernel only and runs it for either.
enum class ScanAlgorithm { Chunked, Sequential };

// AdamW's hyperparameters for one step (Backend::adamw_step).
struct AdamWHyper {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;             // t, from 1
  double grad_scale = 1.0;  // g is read as g * grad_scale: clipping by the global norm, folded in
};

// How sample_tokens (backend_kernels.def) draws a token from a row of logits: temperature >= 0
// (0: greedy), top_k >= 0 (0: no limit), top_p in (0, 1] (train/generate.h says what each does).
struct SamplingParams {
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
};

// One decoding token of a gated linear attention layer (linear_attention_step in
// backend_kernels.def), per (batch b, head h); every tensor below is (B, H, width) with a
// contiguous last dim unless said otherwise. Undefined members are absent terms.
struct LinearStepInputs {
  Tensor q{}, k{};            // (B, H, dk): the feature map's inputs (the projections)
  Tensor v{};                 // (B, H, dv)
  Tensor gk{}, gv{};          // log decays (B, H, dk | 1), (B, H, dv | 1), <= 0
  Tensor gate_a{}, gate_c{};  // ReGLA's refined gate pre-activations (B, H, w), w = dv or dk
  Tensor gate_bias_a{}, gate_bias_c{};  // their biases, (H w) contiguous
  Tensor key_gate{}, value_gate{};  // log-sigmoid gates' pre-activations (B, H, dk), (B, H, dv)
  Tensor key_gate_bias{}, value_gate_bias{};  // their biases, (H dk), (H dv) contiguous
  Tensor key_max{};           // (B, H, 1, 1) contiguous: the running key max before this token
  Tensor state{};             // (B, H, dv, dk) contiguous: S before this token
  Tensor norm_weight{};       // (dv) contiguous: the output RMSNorm's gain shared by the heads
};

// The choices of linear_attention_step: the feature map of q and k (identity, or ReGLA's
// normalized exp with the running key max), the refined gate's dim, the query scale, the gates'
// floor, the log-sigmoid gates' normalizer, and whether the output goes through an RMSNorm (eps).
enum class StepFeatureMap { Identity, NormalizedExp };
struct LinearStepOptions {
  StepFeatureMap map = StepFeatureMap::Identity;
  bool refined_gate_on_keys = false;  // the refined gate decays the key dim (else the value dim)
  double scale = 1.0;
  double gate_floor = -20.0;
  double gate_normalizer = 1.0;  // tau of the log-sigmoid gates: log sigmoid(.) / tau (GLA: 16)
  bool output_norm = false;
  double norm_eps = 1e-6;
};

// A decoding step's matrix product with what surrounds it folded in (fused_linear in
// backend_kernels.def): the norm of its input rows before, the activation (and a gated unit's
// second product) and the residual addition after. Undefined members are absent terms.
enum class RowNorm { None, RMS, Layer };
struct FusedLinearInputs {
  Tensor x{};                     // (N, in), rows contiguous (any row stride)
  Tensor weight{}, bias{};        // (out, in) contiguous; (out) contiguous
  Tensor up_weight{}, up_bias{};  // a gated unit's linear branch, like weight and bias
  Tensor norm_weight{}, norm_bias{};  // (in) contiguous: the input norm's gain and (LayerNorm) shift
  Tensor residual{};              // (N, out), rows contiguous: added last
};
struct FusedLinearOptions {
  RowNorm norm = RowNorm::None;
  double norm_eps = 1e-6;
  bool activate = false;
  UnaryOp activation = UnaryOp::GeluErf;  // Relu, GeluTanh, GeluErf or Silu, when activate
};

// The kernel set of one device. Every kernel and its contract is listed once, in
// backend_kernels.def; this class declares each as `virtual void name(...) const = 0`.
class Backend {
 public:
  virtual ~Backend() = default;
#define LINEA_KERNEL(name, ...) virtual void name(__VA_ARGS__) const = 0;
#include "tensor/backend_kernels.def"
#undef LINEA_KERNEL
};

// The backend of a device. CUDA without a CUDA build, or without a GPU, is an Error.
const Backend& backend_for(Device device);
inline const Backend& backend_for(const Tensor& t) { return backend_for(t.device()); }

}  // namespace linea
