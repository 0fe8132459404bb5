#include "nn/recurrent/linear_recurrence.h"

#include "tensor/error.h"

namespace linea::nn {

Tensor linear_recurrence(const Tensor& log_a, const Tensor& b, const Tensor& h0, Tensor* final_h,
                         const linear::ScanOptions& options) {
  LINEA_CHECK(log_a.defined() && b.defined() && log_a.dim() >= 2 && log_a.shape() == b.shape(), "linear_recurrence",
              "log_a and b must be (..., T, C) of one shape, got ", log_a.describe(), " and ", b.describe());
  const int64_t T = b.size(-2), C = b.size(-1);
  const Shape lead(b.shape().begin(), b.shape().end() - 2);
  Shape state_shape = lead;
  state_shape.push_back(C);
  LINEA_CHECK(!h0.defined() || h0.shape() == state_shape, "linear_recurrence", "h0 must be ", shape_str(state_shape),
              " for b ", b.describe(), ", got ", h0.describe());
  // (..., T, C) -> (B', 1, T, C): the leading dims are the scan's batch, one head.
  const int64_t batch = numel_of(lead);
  const Tensor v = reshape(b, {batch, 1, T, C}), gv = reshape(log_a, {batch, 1, T, C});
  const Tensor one = ones({batch, 1, T, 1}, {b.dtype(), b.device()});  // q = k = 1
  const Tensor s0 = h0.defined() ? reshape(h0, {batch, 1, C, 1}) : Tensor();
  Tensor s_final;
  const Tensor h = linear::scan(one, one, v, Tensor(), gv, s0, final_h ? &s_final : nullptr, options);
  if (final_h) *final_h = reshape(s_final, state_shape);
  return reshape(h, b.shape());
}

void check_scan_options(const linear::ScanOptions& options, const char* layer) {
  LINEA_CHECK(options.sub_block > 0 && options.chunk_size > 0 && options.chunk_size % options.sub_block == 0, layer,
              "chunk_size ", options.chunk_size, " must be a positive multiple of sub_block ", options.sub_block);
}

}  // namespace linea::nn
