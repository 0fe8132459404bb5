// Drawing tokens from logits (generation, train/generate.cpp) as an op: it checks what the kernels
// assume, then calls the device's kernel, so the ids stay on the logits' device. Like the
// optimizer's ops (optim.cpp) it works outside autograd: ids have no gradient.
#include <cmath>

#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {

// What the kernels assume of the operands.
void check_sampling(const Tensor& logits, const Tensor& u, const SamplingParams& params, const char* op) {
  check_floating(logits, op);
  check_defined(u, op);
  LINEA_CHECK(logits.dim() == 2, op, "logits must be (batch, vocab), got ", logits.describe());
  const int64_t rows = logits.size(0);
  LINEA_CHECK(logits.size(1) > 0, op, "no logits to sample from: ", logits.describe());
  LINEA_CHECK(u.dtype() == kFloat64, op, "the uniforms must be float64, got ", u.describe());
  LINEA_CHECK(u.dim() == 1 && u.size(0) == rows, op, "one uniform per row of logits ", logits.describe(),
              " is needed, got ", u.describe());
  LINEA_CHECK(u.device() == logits.device(), op, "logits and uniforms are on different devices: ",
              logits.describe(), " and ", u.describe());
  LINEA_CHECK(params.temperature >= 0 && std::isfinite(params.temperature), op, "temperature must be >= 0, got ",
              params.temperature);
  LINEA_CHECK(params.top_k >= 0, op, "top_k must be >= 0 (0: no limit), got ", params.top_k);
  LINEA_CHECK(params.top_p > 0 && params.top_p <= 1, op, "top_p must be in (0, 1], got ", params.top_p);
}

}  // namespace

Tensor sample_tokens(const Tensor& logits, const Tensor& u, const SamplingParams& params) {
  check_sampling(logits, u, params, "sample_tokens");
  Tensor ids = empty({logits.size(0)}, kInt64, logits.device());
  return sample_tokens_(ids, logits, u, params);
}

Tensor& sample_tokens_(Tensor& ids, const Tensor& logits, const Tensor& u, const SamplingParams& params) {
  const char* op = "sample_tokens_";
  check_sampling(logits, u, params, op);
  check_defined(ids, op);
  LINEA_CHECK(ids.dtype() == kInt64 && ids.dim() == 1 && ids.size(0) == logits.size(0) && ids.is_contiguous() &&
                  ids.device() == logits.device(),
              op, "the ids must be (", logits.size(0), ") Int64 contiguous on ", logits.device().str(), ", got ",
              ids.describe());
  LINEA_CHECK(!ids.requires_grad(), op, "the ids are written in place and must not require grad");
  if (logits.size(0) > 0) backend_for(logits).sample_tokens(contiguous_rows(logits), contiguous(detach(u)), params, ids);
  return ids;
}

}  // namespace linea
