#pragma once
// The gated linear attention recurrence that every linear layer of linea reduces to. Per batch
// element and head, with a state S (dv x dk):
//
//   S_t = diag(exp(gv_t)) S_{t-1} diag(exp(gk_t)) + v_t k_t^T
//   o_t = S_t q_t
//
// gk_t <= 0 is a log decay on the KEY dim (GLA, Fast Decay's second factor), gv_t <= 0 one on the
// VALUE dim (ReGLA as written, Fast Decay's first factor); either may be undefined (no decay) or
// have a last dim of 1 (a scalar decay: RFA's gate, ReGLA's running-max rescaling). Feature maps,
// scales, normalization and gates are applied by the caller (nn/linear_attention/linear_attention.h); this
// file only does the recurrence, in its two forms:
//
//   chunked_scan    the parallel form for training: time is split into chunks of C; within a
//                   chunk outputs come from matrix products, between chunks a state is carried
//                   (docs/math.md#recurrent-parallel-and-chunked-forms). Memory
//                   O(T (dk + dv + C)) per head: no T x T and no T x C x d tensor is formed.
//                   Every exponent is <= 0, so nothing overflows.
//   scan_step       the recurrent form: one token, state in, state out (size independent of T).
//
// Both are composite (made of differentiable ops), so their gradients come from autograd; they
// document the math and are the references of the fused op (autograd/ops.h: gated_linear_scan),
// whose kernels run forward and backward in a few launches each. `scan` picks one for the layers.
#include <string>

#include "autograd/ops.h"

namespace linea::nn::linear {

// What runs a layer's recurrence. The three compute the same thing (tests/autograd/gated_scan_test.cpp).
enum class ScanKernel {
  Chunked,     // the fused op on the backend's chunked kernels (CUDA: tensor cores); the default
  Sequential,  // the fused op on the backend's step-by-step kernels (the CUDA SIMT scan)
  Composite,   // chunked_scan below: slower, but twice differentiable (the fused backward is not)
};
std::string scan_kernel_name(ScanKernel kernel);  // "chunked", "sequential", "composite"
ScanKernel parse_scan_kernel(const std::string& name);

struct ScanOptions {
  int64_t chunk_size = 64;  // C of the composite form (the fused kernels choose their own)
  int64_t sub_block = 16;   // secondary chunking inside a chunk (divides chunk_size)
  ScanKernel kernel = ScanKernel::Chunked;
};

// The recurrence for the layers' forward, by options.kernel. Same arguments and result as
// chunked_scan (final_state, when non-null, receives S_T, differentiable either way).
Tensor scan(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
            const Tensor& initial_state = Tensor(), Tensor* final_state = nullptr, const ScanOptions& options = {});

// q, k (B, H, T, dk); v (B, H, T, dv); gk (B, H, T, dk|1) or undefined; gv (B, H, T, dv|1) or
// undefined; initial_state (B, H, dv, dk) or undefined (zeros). Returns o (B, H, T, dv); when
// final_state is non-null it receives S_T.
Tensor chunked_scan(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
                    const Tensor& initial_state = Tensor(), Tensor* final_state = nullptr,
                    const ScanOptions& options = {});

// One step: q, k (B, H, dk); v (B, H, dv); gk (B, H, dk|1) or undefined; gv (B, H, dv|1) or
// undefined; state (B, H, dv, dk) is replaced by S_t. Returns o_t (B, H, dv).
Tensor scan_step(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
                 Tensor& state);

// The recurrence run token by token with scan_step: the reference the chunked form is tested
// against.
Tensor recurrent_scan(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
                      const Tensor& initial_state = Tensor(), Tensor* final_state = nullptr);

}  // namespace linea::nn::linear
