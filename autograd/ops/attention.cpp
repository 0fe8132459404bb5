// Fused causal softmax attention: one kernel forward (saving each query row's logsumexp) and one
// backward, instead of the composite matmul -> masked_fill -> softmax -> matmul with its T x T
// score matrix (tests/autograd/attention_op_test.cpp checks the two against each other).
#include <cmath>

#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {

void check_attention_inputs(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window) {
  const char* op = "scaled_dot_product_attention";
  check_floating(q, op);
  check_compatible(q, k, op);
  check_compatible(q, v, op);
  auto shapes = [&] { return q.describe() + ", k " + k.describe() + ", v " + v.describe(); };
  LINEA_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
              "needs q (B, H, Tq, dh) and k, v (B, KV, Tk, dh), got q ", shapes());
  LINEA_CHECK(k.shape() == v.shape(), op, "k and v must have one shape, got q ", shapes());
  LINEA_CHECK(q.size(0) == k.size(0) && q.size(3) == k.size(3), op,
              "q, k and v must agree in batch and head dim, got q ", shapes());
  LINEA_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, op, "the ", k.size(1),
              " K/V heads must divide the ", q.size(1), " query heads, got q ", shapes());
  LINEA_CHECK(q.size(2) <= k.size(2), op,
              "the queries are the last Tq of the Tk key positions, so Tq <= Tk, got q ", shapes());
  LINEA_CHECK(q.size(3) > 0, op, "needs a head dim > 0, got q ", shapes());
  LINEA_CHECK(window >= 0, op, "window must be >= 0 (0: the full causal prefix), got ", window);
}

}  // namespace

// q (B,H,Tq,dh), k/v (B,KV,Tk,dh) -> out (B,H,Tq,dh); lse (B,H,Tq) saved for backward.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window,
                                    std::optional<double> scale) {
  check_attention_inputs(q, k, v, window);
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  LINEA_CHECK(std::isfinite(s), "scaled_dot_product_attention", "scale must be finite, got ", s);
  Tensor out = empty_like_order(q);  // in q's memory order: the layer's transpose back is a view
  Tensor lse = empty({q.size(0), q.size(1), q.size(2)}, compute_dtype(q.dtype()), q.device());  // float32 for bf16
  if (q.numel() > 0) backend_for(q).attention(q, k, v, s, window, out, lse);
  // forward was p = softmax_s(scale q.k_s) over the visible keys, out = sum_s p_s v_s; backward
  // recomputes p from q, k and lse (no T x T matrix saved) and needs out for D_i = dout_i . out_i.
  return record("scaled_dot_product_attention", {q, k, v}, out,
                [qs = SavedTensor(q), ks = SavedTensor(k), vs = SavedTensor(v), os = SavedTensor(out),
                 ls = SavedTensor(lse), s, window](const Tensor& gout) -> Grads {
                  const Tensor q = qs.get(), k = ks.get(), v = vs.get();
                  Tensor gq = empty_like_order(q), gk = empty_like_order(k), gv = empty_like_order(v);
                  if (q.numel() > 0) {
                    backend_for(q).attention_backward(q, k, v, os.get(), ls.get(), gout, s, window, gq, gk, gv);
                  } else {  // no query: nothing reads k or v
                    fill_(gq, 0.0);
                    fill_(gk, 0.0);
                    fill_(gv, 0.0);
                  }
                  return {gq, gk, gv};
                });
}

}  // namespace linea
