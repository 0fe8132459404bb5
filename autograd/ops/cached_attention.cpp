// cached_attention_step: softmax attention's decoding token over a KV cache kept in place (the
// contract is in tensor/backend_kernels.def), and cached_attention_projected, the same step with
// the product its output feeds. The ops check what the kernels assume, since the kernels write
// into the cache and the positions: wrong shapes there would scribble over memory. Nothing is
// recorded (no backward); the cache and the positions get their versions bumped, so a tensor
// saved for a backward before the step fails its check instead of reading changed data.
#include <cmath>

#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {

void check_shape(const Tensor& t, const Shape& shape, const char* name, const char* op) {
  LINEA_CHECK(t.shape() == shape, op, name, " must have shape ", shape_str(shape), ", got ", t.describe());
}

// A tensor the kernel writes: it must be the memory itself, not a copy of it.
void check_writable(const Tensor& t, const char* name, const char* op) {
  LINEA_CHECK(t.is_contiguous(), op, name, " is written in place and must be contiguous, got ", t.describe());
  LINEA_CHECK(!is_grad_enabled() || !t.requires_grad(), op, name,
              " requires grad, but the step writes it in place with no backward");
}

// The step's inputs once checked, as the kernels read them: q, k, v may be rows of a larger
// product (the step's stacked projection), so each batch row's heads must be dense and the batch
// stride is free; the tables are made contiguous.
struct StepInputs {
  Tensor q, k, v, cos, sin;
  double scale;
};

StepInputs checked_step(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& positions, const Tensor& cos,
                        const Tensor& sin, const Tensor& cache_k, const Tensor& cache_v, std::optional<double> scale,
                        const char* op) {
  for (const Tensor* t : {&q, &k, &v}) check_defined(*t, op);
  for (const Tensor* t : {&positions, &cache_k, &cache_v}) check_defined(*t, op);
  check_floating(q, op);
  LINEA_CHECK(q.dim() == 3 && q.numel() > 0, op, "q must be (B, H, dh) and non-empty, got ", q.describe());
  LINEA_CHECK(cache_k.dim() == 4, op, "the cache must be (B, KV, C, dh), got ", cache_k.describe());
  const int64_t B = q.size(0), H = q.size(1), dh = q.size(2), KV = cache_k.size(1), C = cache_k.size(2);
  LINEA_CHECK(KV > 0 && H % KV == 0, op, "the cache's ", KV, " K/V heads must divide q's ", H, " heads");
  LINEA_CHECK(C > 0, op, "the cache has no columns: ", cache_k.describe());
  for (const Tensor* t : {&k, &v}) check_compatible(q, *t, op);
  for (const Tensor* t : {&cache_k, &cache_v}) check_compatible(q, *t, op);
  check_shape(k, {B, KV, dh}, "k", op);
  check_shape(v, {B, KV, dh}, "v", op);
  check_shape(cache_k, {B, KV, C, dh}, "cache_k", op);
  check_shape(cache_v, {B, KV, C, dh}, "cache_v", op);
  LINEA_CHECK(positions.dtype() == kInt64 && positions.device() == q.device(), op,
              "positions must be Int64 on q's device, got ", positions.describe(), " for q ", q.describe());
  check_shape(positions, {B}, "positions", op);
  LINEA_CHECK(cos.defined() == sin.defined(), op, "RoPE needs both tables (cos and sin), or neither");
  if (cos.defined()) {
    check_compatible(q, cos, op);
    check_compatible(q, sin, op);
    LINEA_CHECK(cos.dim() == 2 && cos.size(1) > 0 && 2 * cos.size(1) <= dh && cos.shape() == sin.shape(), op,
                "the RoPE tables must be (length, half) with 0 < 2 half <= dh = ", dh, ", got ", cos.describe(),
                " and ", sin.describe());
  }
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(dh)));
  LINEA_CHECK(std::isfinite(s), op, "scale must be finite, got ", s);
  for (const Tensor* t : {&q, &k, &v, &cos, &sin})
    LINEA_CHECK(!is_grad_enabled() || !t->defined() || !t->requires_grad(), op,
                "has no backward (a decoding step): run it under NoGradGuard, or with inputs that do not require grad");
  check_writable(cache_k, "cache_k", op);
  check_writable(cache_v, "cache_v", op);
  check_writable(positions, "positions", op);
  LINEA_CHECK(cache_k.storage() != cache_v.storage(), op, "cache_k and cache_v must not share memory");

  auto heads_dense = [](const Tensor& t) {
    const bool dense = t.stride(2) == 1 && (t.size(1) == 1 || t.stride(1) == t.size(2));
    return dense ? detach(t) : contiguous(detach(t));
  };
  auto dense = [](const Tensor& t) { return t.defined() ? contiguous(detach(t)) : t; };
  return {heads_dense(q), heads_dense(k), heads_dense(v), dense(cos), dense(sin), s};
}

void bump_versions(Tensor& positions, Tensor& cache_k, Tensor& cache_v) {
  for (Tensor* t : {&cache_k, &cache_v, &positions}) t->bump_version();
}

}  // namespace

Tensor cached_attention_step(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& positions, const Tensor& cos,
                             const Tensor& sin, Tensor& cache_k, Tensor& cache_v, std::optional<double> scale) {
  const StepInputs in = checked_step(q, k, v, positions, cos, sin, cache_k, cache_v, scale, "cached_attention_step");
  Tensor out = empty(q.shape(), q.dtype(), q.device());
  backend_for(q).cached_attention_step(in.q, in.k, in.v, positions, in.cos, in.sin, in.scale, cache_k, cache_v, out);
  bump_versions(positions, cache_k, cache_v);
  return out;
}

Tensor cached_attention_projected(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& positions,
                                  const Tensor& cos, const Tensor& sin, Tensor& cache_k, Tensor& cache_v,
                                  const AttentionProjection& projection, std::optional<double> scale) {
  const char* op = "cached_attention_projected";
  const StepInputs in = checked_step(q, k, v, positions, cos, sin, cache_k, cache_v, scale, op);
  const int64_t B = q.size(0), width = q.size(1) * q.size(2);
  const Tensor& weight = projection.weight;
  LINEA_CHECK(weight.defined() && weight.dim() == 2 && weight.size(1) == width, op,
              "the projection's weight must be (out, H dh = ", width, "), got ",
              weight.defined() ? weight.describe() : std::string("none"));
  const int64_t outputs = weight.size(0);
  for (const Tensor* t : {&projection.weight, &projection.bias, &projection.residual}) {
    if (!t->defined()) continue;
    check_compatible(q, *t, op);
    LINEA_CHECK(!is_grad_enabled() || !t->requires_grad(), op,
                "has no backward (a decoding step): run it under NoGradGuard, or with inputs that do not require grad");
  }
  if (projection.bias.defined()) check_shape(projection.bias, {outputs}, "the projection's bias", op);
  if (projection.residual.defined()) check_shape(projection.residual, {B, outputs}, "the residual", op);
  Tensor out;
  if (B > kFusedLinearMaxRows) {
    // Rows enough for a matrix product to read the weights once for all of them (fused_linear's
    // rule): the step, then the product as fused_linear chooses it.
    const Tensor heads = empty(q.shape(), q.dtype(), q.device());
    backend_for(q).cached_attention_step(in.q, in.k, in.v, positions, in.cos, in.sin, in.scale, cache_k, cache_v,
                                         heads);
    out = fused_linear({.x = reshape(heads, {B, width}), .weight = weight, .bias = projection.bias,
                        .residual = projection.residual},
                       {});
  } else {
    FusedLinearInputs product{.weight = contiguous(detach(weight))};
    if (projection.bias.defined()) product.bias = contiguous(detach(projection.bias));
    if (projection.residual.defined()) product.residual = contiguous_rows(detach(projection.residual));
    out = empty({B, outputs}, q.dtype(), q.device());
    backend_for(q).cached_attention_projected(in.q, in.k, in.v, positions, in.cos, in.sin, in.scale, cache_k,
                                               cache_v, product, out);
  }
  bump_versions(positions, cache_k, cache_v);
  return out;
}

}  // namespace linea
