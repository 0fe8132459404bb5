// Causal softmax attention, the plain CPU kernel: the oracle the CUDA FlashAttention kernel is
// tested against. One query row at a time with an online softmax, so no T x T matrix exists;
// scores and sums in double. bfloat16 runs the float32 kernel on the widened inputs and rounds the
// outputs once (tensor/widen.h); lse is then float32.
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"
#include "tensor/widen.h"

namespace linea::cpu {

namespace {

// The key positions query row i may see: [first, last].
struct KeyRange {
  int64_t first, last;
};
KeyRange visible_keys(int64_t i, int64_t tq, int64_t tk, int64_t window) {
  const int64_t position = tk - tq + i;
  return {window > 0 ? std::max<int64_t>(0, position - window + 1) : 0, position};
}

// The loops below write contiguous rows; an output with other strides receives them through a
// contiguous temporary, copied in by done().
class RowsOut {
 public:
  RowsOut(const CpuBackend& backend, const Tensor& target)
      : backend_(backend), target_(target),
        rows_(target.is_contiguous() ? target : empty(target.shape(), target.dtype(), target.device())) {}
  const Tensor& rows() const { return rows_; }
  void done() const {
    if (!target_.is_contiguous()) backend_.copy(rows_, target_);
  }

 private:
  const CpuBackend& backend_;
  Tensor target_, rows_;
};

template <class T>
double dot(const T* a, const T* b, int64_t n) {
  double s = 0;
  for (int64_t j = 0; j < n; ++j) s += static_cast<double>(a[j]) * b[j];
  return s;
}

}  // namespace

void CpuBackend::attention(const Tensor& q_, const Tensor& k_, const Tensor& v_, double scale, int64_t window,
                           const Tensor& out_, const Tensor& lse) const {
  if (q_.dtype() == kBFloat16) {
    const Tensor out = float32_result(out_);
    attention(widened(*this, q_), widened(*this, k_), widened(*this, v_), scale, window, out, lse);
    narrow_into(*this, out, out_);
    return;
  }
  const Tensor q = contiguous_copy(q_), k = contiguous_copy(k_), v = contiguous_copy(v_);
  const RowsOut out_rows(*this, out_);
  const Tensor& out = out_rows.rows();
  const int64_t batch = q.size(0), heads = q.size(1), tq = q.size(2), dh = q.size(3);
  const int64_t kv = k.size(1), tk = k.size(2), group = heads / kv;
  dispatch_floating(q.dtype(), "attention", [&]<class T>() {
    const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>();
    T* po = out.data<T>();
    T* pl = lse.data<T>();
    parallel_for(batch * heads * tq, 16, [&](int64_t begin, int64_t end) {
      std::vector<double> acc(dh);
      for (int64_t row = begin; row < end; ++row) {
        const int64_t i = row % tq, bh = row / tq, b = bh / heads, h = bh % heads;
        const T* qi = pq + row * dh;
        const int64_t kv_base = (b * kv + h / group) * tk;
        const KeyRange r = visible_keys(i, tq, tk, window);
        double m = -std::numeric_limits<double>::infinity(), sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t s = r.first; s <= r.last; ++s) {
          const double score = dot(qi, pk + (kv_base + s) * dh, dh) * scale;
          // Online softmax: rescale what was accumulated when the running max grows.
          const double new_m = std::max(m, score);
          const double shrink = std::exp(m - new_m), w = std::exp(score - new_m);
          sum = sum * shrink + w;
          const T* vs = pv + (kv_base + s) * dh;
          for (int64_t j = 0; j < dh; ++j) acc[j] = acc[j] * shrink + w * vs[j];
          m = new_m;
        }
        for (int64_t j = 0; j < dh; ++j) po[row * dh + j] = static_cast<T>(sum > 0 ? acc[j] / sum : 0.0);
        pl[row] = static_cast<T>(sum > 0 ? m + std::log(sum) : -std::numeric_limits<double>::infinity());
      }
    });
  });
  out_rows.done();
}

void CpuBackend::attention_backward(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& out_,
                                    const Tensor& lse_, const Tensor& dout_, double scale, int64_t window,
                                    const Tensor& dq_, const Tensor& dk_, const Tensor& dv_) const {
  if (q_.dtype() == kBFloat16) {
    const Tensor dq = float32_result(dq_), dk = float32_result(dk_), dv = float32_result(dv_);
    attention_backward(widened(*this, q_), widened(*this, k_), widened(*this, v_), widened(*this, out_), lse_,
                       widened(*this, dout_), scale, window, dq, dk, dv);
    narrow_into(*this, dq, dq_);
    narrow_into(*this, dk, dk_);
    narrow_into(*this, dv, dv_);
    return;
  }
  const Tensor q = contiguous_copy(q_), k = contiguous_copy(k_), v = contiguous_copy(v_);
  const RowsOut dq_rows(*this, dq_), dk_rows(*this, dk_), dv_rows(*this, dv_);
  const Tensor &dq = dq_rows.rows(), &dk = dk_rows.rows(), &dv = dv_rows.rows();
  const Tensor out = contiguous_copy(out_), lse = contiguous_copy(lse_), dout = contiguous_copy(dout_);
  const int64_t batch = q.size(0), heads = q.size(1), tq = q.size(2), dh = q.size(3);
  const int64_t kv = k.size(1), tk = k.size(2), group = heads / kv;
  fill(dk, 0.0);
  fill(dv, 0.0);
  dispatch_floating(q.dtype(), "attention_backward", [&]<class T>() {
    const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>(), *po = out.data<T>(), *pl = lse.data<T>(),
            *pdo = dout.data<T>();
    T *pdq = dq.data<T>(), *pdk = dk.data<T>(), *pdv = dv.data<T>();
    // forward was p_is = exp(scale q_i.k_s - lse_i), o_i = sum_s p_is v_s, so with
    // D_i = do_i . o_i:  dv_s += p_is do_i;  ds_is = p_is (do_i . v_s - D_i);
    //                    dq_i += scale ds_is k_s;  dk_s += scale ds_is q_i.
    // One task per (batch, K/V head) owns its dk, dv rows: no two threads write one row.
    parallel_for(batch * kv, 1, [&](int64_t begin, int64_t end) {
      std::vector<double> dq_row(dh);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / kv, j = task % kv, kv_base = (b * kv + j) * tk;
        for (int64_t h = j * group; h < (j + 1) * group; ++h)
          for (int64_t i = 0; i < tq; ++i) {
            const int64_t row = (b * heads + h) * tq + i;
            const T *qi = pq + row * dh, *doi = pdo + row * dh;
            const double d_i = dot(doi, po + row * dh, dh), l = pl[row];
            std::fill(dq_row.begin(), dq_row.end(), 0.0);
            const KeyRange r = visible_keys(i, tq, tk, window);
            for (int64_t s = r.first; s <= r.last; ++s) {
              const T *ks = pk + (kv_base + s) * dh, *vs = pv + (kv_base + s) * dh;
              const double p = std::exp(dot(qi, ks, dh) * scale - l);
              const double ds = p * (dot(doi, vs, dh) - d_i) * scale;
              T *dks = pdk + (kv_base + s) * dh, *dvs = pdv + (kv_base + s) * dh;
              for (int64_t c = 0; c < dh; ++c) {
                dvs[c] += static_cast<T>(p * doi[c]);
                dks[c] += static_cast<T>(ds * qi[c]);
                dq_row[c] += ds * ks[c];
              }
            }
            for (int64_t c = 0; c < dh; ++c) pdq[row * dh + c] = static_cast<T>(dq_row[c]);
          }
      }
    });
  });
  dq_rows.done();
  dk_rows.done();
  dv_rows.done();
}

void CpuBackend::adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                            const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                            const std::vector<bool>& decay, const AdamWHyper& hp) const {
  const double correction1 = 1.0 - std::pow(hp.beta1, static_cast<double>(hp.step));
  const double correction2 = 1.0 - std::pow(hp.beta2, static_cast<double>(hp.step));
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor grad = contiguous_copy(grads[i]);
    // The decay shrinks p before the Adam move (AdamW's order, and PyTorch's): p * (1 - lr wd),
    // which leaves p * (1 - lr wd) exactly when the move is zero.
    const double shrink = 1.0 - hp.lr * (decay[i] ? hp.weight_decay : 0.0);
    dispatch_floating(params[i].dtype(), "adamw_step", [&]<class T>() {
      T *p = params[i].data<T>(), *m = exp_avg[i].data<T>(), *v = exp_avg_sq[i].data<T>();
      const T* g = grad.data<T>();
      parallel_for(params[i].numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
        for (int64_t e = begin; e < end; ++e) {
          const double ge = g[e] * hp.grad_scale;
          const double me = hp.beta1 * m[e] + (1 - hp.beta1) * ge;
          const double ve = hp.beta2 * v[e] + (1 - hp.beta2) * ge * ge;
          m[e] = static_cast<T>(me);
          v[e] = static_cast<T>(ve);
          const double move = (me / correction1) / (std::sqrt(ve / correction2) + hp.eps);
          p[e] = static_cast<T>(p[e] * shrink - hp.lr * move);
        }
      });
    });
  }
}

}  // namespace linea::cpu
