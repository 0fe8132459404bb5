// cached_attention_step: softmax attention's decoding token over a KV cache kept in place (the
// contract is in tensor/backend_kernels.def). The op checks what the kernels assume, since the
// kernels write into the cache and the positions: wrong shapes there would scribble over memory.
// Nothing is recorded (no backward); the cache and the positions get their versions bumped, so a
// tensor saved for a backward before the step fails its check instead of reading changed data.
#include <cmath>

#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {

constexpr const char* kOp = "cached_attention_step";

void check_shape(const Tensor& t, const Shape& shape, const char* name) {
  LINEA_CHECK(t.shape() == shape, kOp, name, " must have shape ", shape_str(shape), ", got ", t.describe());
}

// A tensor the kernel writes: it must be the memory itself, not a copy of it.
void check_writable(const Tensor& t, const char* name) {
  LINEA_CHECK(t.is_contiguous(), kOp, name, " is written in place and must be contiguous, got ", t.describe());
  LINEA_CHECK(!is_grad_enabled() || !t.requires_grad(), kOp, name,
              " requires grad, but the step writes it in place with no backward");
}

}  // namespace

Tensor cached_attention_step(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& positions, const Tensor& cos,
                             const Tensor& sin, Tensor& cache_k, Tensor& cache_v, std::optional<double> scale) {
  for (const Tensor* t : {&q, &k, &v}) check_defined(*t, kOp);
  for (const Tensor* t : {&positions, &cache_k, &cache_v}) check_defined(*t, kOp);
  check_floating(q, kOp);
  LINEA_CHECK(q.dim() == 3 && q.numel() > 0, kOp, "q must be (B, H, dh) and non-empty, got ", q.describe());
  LINEA_CHECK(cache_k.dim() == 4, kOp, "the cache must be (B, KV, C, dh), got ", cache_k.describe());
  const int64_t B = q.size(0), H = q.size(1), dh = q.size(2), KV = cache_k.size(1), C = cache_k.size(2);
  LINEA_CHECK(KV > 0 && H % KV == 0, kOp, "the cache's ", KV, " K/V heads must divide q's ", H, " heads");
  LINEA_CHECK(C > 0, kOp, "the cache has no columns: ", cache_k.describe());
  for (const Tensor* t : {&k, &v}) check_compatible(q, *t, kOp);
  for (const Tensor* t : {&cache_k, &cache_v}) check_compatible(q, *t, kOp);
  check_shape(k, {B, KV, dh}, "k");
  check_shape(v, {B, KV, dh}, "v");
  check_shape(cache_k, {B, KV, C, dh}, "cache_k");
  check_shape(cache_v, {B, KV, C, dh}, "cache_v");
  LINEA_CHECK(positions.dtype() == kInt64 && positions.device() == q.device(), kOp,
              "positions must be Int64 on q's device, got ", positions.describe(), " for q ", q.describe());
  check_shape(positions, {B}, "positions");
  LINEA_CHECK(cos.defined() == sin.defined(), kOp, "RoPE needs both tables (cos and sin), or neither");
  if (cos.defined()) {
    check_compatible(q, cos, kOp);
    check_compatible(q, sin, kOp);
    LINEA_CHECK(cos.dim() == 2 && cos.size(1) > 0 && 2 * cos.size(1) <= dh && cos.shape() == sin.shape(), kOp,
                "the RoPE tables must be (length, half) with 0 < 2 half <= dh = ", dh, ", got ", cos.describe(),
                " and ", sin.describe());
  }
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(dh)));
  LINEA_CHECK(std::isfinite(s), kOp, "scale must be finite, got ", s);
  for (const Tensor* t : {&q, &k, &v, &cos, &sin})
    LINEA_CHECK(!is_grad_enabled() || !t->defined() || !t->requires_grad(), kOp,
                "has no backward (a decoding step): run it under NoGradGuard, or with inputs that do not require grad");
  check_writable(cache_k, "cache_k");
  check_writable(cache_v, "cache_v");
  check_writable(positions, "positions");
  LINEA_CHECK(cache_k.storage() != cache_v.storage(), kOp, "cache_k and cache_v must not share memory");

  Tensor out = empty({B, H, dh}, q.dtype(), q.device());
  // q, k, v may be rows of a larger product (the step's stacked projection): each batch row's
  // heads must be dense, the batch stride is free.
  auto heads_dense = [](const Tensor& t) {
    const bool dense = t.stride(2) == 1 && (t.size(1) == 1 || t.stride(1) == t.size(2));
    return dense ? detach(t) : contiguous(detach(t));
  };
  auto dense = [](const Tensor& t) { return t.defined() ? contiguous(detach(t)) : t; };
  backend_for(q).cached_attention_step(heads_dense(q), heads_dense(k), heads_dense(v), positions, dense(cos),
                                        dense(sin), s, cache_k, cache_v, out);
  for (Tensor* t : {&cache_k, &cache_v, &positions}) t->bump_version();
  return out;
}

}  // namespace linea
