#pragma once
// The diagonal linear recurrence, channel by channel:
//
//   h_t = exp(log_a_t) * h_{t-1} + b_t,      log_a_t <= 0
//
// the core of the RG-LRU (rg_lru.h) and of WQKV's running normalizers (nn/pooling/wqkv.h).
//
// Its parallel form is the gated linear attention scan (nn/linear_attention/scan.h) in its smallest shape:
// a state of dv = channels rows and dk = 1 column, q = k = 1, and the log decay on the value dim,
//   S_t = diag(exp(gv_t)) S_{t-1} + v_t k_t^T = diag(a_t) S_{t-1} + b_t   and   o_t = S_t q_t = h_t,
// so it runs through linear::scan (the fused kernel, or with options.kernel = Composite the
// chunked form: every exponent <= 0, sums of log decays taken over exactly the steps they span,
// the diagonal sub-blocks masked before exp; memory O(T (C / L + L) channels) per sequence for
// chunks of C in sub-blocks of L) and inherits its tests.
#include "nn/linear_attention/scan.h"

namespace linea::nn {

// log_a, b (..., T, C) of one float dtype; h0 (..., C) or undefined (zeros). Returns h
// (..., T, C); *final_h receives h_T (..., C).
Tensor linear_recurrence(const Tensor& log_a, const Tensor& b, const Tensor& h0 = Tensor(), Tensor* final_h = nullptr,
                         const linear::ScanOptions& options = {});

// A layer's scan options, checked when the layer is built rather than at its first forward:
// "RGLRU: chunk_size 12 must be a positive multiple of sub_block 8".
void check_scan_options(const linear::ScanOptions& options, const char* layer);

}  // namespace linea::nn
