// One decoding token of a gated linear attention layer, fused (tensor/backend_kernels.def:
// linear_attention_step): the plain CPU kernel and the oracle of the CUDA one. One task per
// (batch, head), in parallel; within a task the steps run in the order the contract writes them,
// in the element type.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"
#include "tensor/scalar_math.h"

namespace linea::cpu {

namespace {

// A (B, H, width) input with a contiguous last dim, read per (b, h); width 1 broadcasts over the
// channels (a scalar decay). Undefined reads as absent.
template <class T>
struct HeadRows {
  const T* data = nullptr;
  int64_t stride_b = 0, stride_h = 0, width = 0;

  explicit HeadRows(const Tensor& t) {
    if (!t.defined()) return;
    data = t.data<T>();
    stride_b = t.stride(0);
    stride_h = t.stride(1);
    width = t.size(2);
  }
  bool present() const { return data != nullptr; }
  const T* row(int64_t b, int64_t h) const { return data + b * stride_b + h * stride_h; }
  T at(int64_t b, int64_t h, int64_t c) const { return row(b, h)[width == 1 ? 0 : c]; }
};

}  // namespace

void CpuBackend::linear_attention_step(const LinearStepInputs& in, const LinearStepOptions& options,
                                       const Tensor& out, const Tensor& new_state, const Tensor& new_key_max) const {
  dispatch_floating(in.q.dtype(), "linear_attention_step", [&]<class T>() {
    const int64_t B = in.q.size(0), H = in.q.size(1), dk = in.q.size(2), dv = in.v.size(2);
    const HeadRows<T> q(in.q), k(in.k), v(in.v), gk(in.gk), gv(in.gv), ga(in.gate_a), gc(in.gate_c);
    const HeadRows<T> key_gate(in.key_gate), value_gate(in.value_gate);
    const T* bias_a = data_or_null<T>(in.gate_bias_a);
    const T* bias_c = data_or_null<T>(in.gate_bias_c);
    const T* key_gate_bias = data_or_null<T>(in.key_gate_bias);
    const T* value_gate_bias = data_or_null<T>(in.value_gate_bias);
    const T normalizer = static_cast<T>(options.gate_normalizer);
    const T* key_max = in.key_max.defined() ? in.key_max.data<T>() : nullptr;
    const T* state = in.state.data<T>();
    const T* weight = in.norm_weight.defined() ? in.norm_weight.data<T>() : nullptr;
    T* po = out.data<T>();
    T* ps = new_state.data<T>();
    T* pm = new_key_max.defined() ? new_key_max.data<T>() : nullptr;
    const bool normalized_exp = options.map == StepFeatureMap::NormalizedExp;
    const T scale = static_cast<T>(options.scale), floor = static_cast<T>(options.gate_floor);
    const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / (dv * dk));

    parallel_for(B * H, grain, [&](int64_t begin, int64_t end) {
      std::vector<T> phi_q(dk), phi_k(dk), decay_k(dk), decay_v(dv), o(dv);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / H, h = task % H;
        const T* qr = q.row(b, h);
        const T* kr = k.row(b, h);
        // The feature maps, and the running max's decay lambda.
        T lambda = 0;
        if (normalized_exp) {
          const T mq = scalar::max_of(qr, dk), row_max = scalar::max_of(kr, dk);
          T m = row_max;
          if (key_max && !scalar::takes_over(row_max, key_max[task])) m = key_max[task];
          if (key_max) lambda = key_max[task] - m;
          for (int64_t c = 0; c < dk; ++c) {
            phi_q[c] = scale * std::exp(qr[c] - mq);
            phi_k[c] = std::exp(kr[c] - m);
          }
          pm[task] = m;
        } else {
          for (int64_t c = 0; c < dk; ++c) {
            phi_q[c] = scale * qr[c];
            phi_k[c] = kr[c];
          }
        }
        // The decays' logs on each side, then their exponentials.
        auto refined = [&](int64_t c) {
          const int64_t at = h * ga.width + c;
          const T a = ga.row(b, h)[c] + (bias_a ? bias_a[at] : T(0));
          const T cc = gc.row(b, h)[c] + (bias_c ? bias_c[at] : T(0));
          const T r = scalar::refined_log_gate(a, cc).value;
          return r < floor ? floor : r;  // max(r, floor), NaN staying NaN as in refined_log_gate
        };
        // max(log sigmoid(x + bias) / normalizer, floor), NaN staying NaN.
        auto log_sigmoid_gate = [&](const HeadRows<T>& gate, const T* bias, int64_t c) {
          const T x = gate.row(b, h)[c] + (bias ? bias[h * gate.width + c] : T(0));
          const T r = scalar::log_sigmoid(x) / normalizer;
          return r < floor ? floor : r;
        };
        const bool refined_keys = ga.present() && options.refined_gate_on_keys;
        const bool refined_values = ga.present() && !options.refined_gate_on_keys;
        for (int64_t c = 0; c < dk; ++c) {
          T log_a = lambda + (gk.present() ? gk.at(b, h, c) : T(0));
          if (refined_keys) log_a += refined(c);
          if (key_gate.present()) log_a += log_sigmoid_gate(key_gate, key_gate_bias, c);
          decay_k[c] = std::exp(log_a);
        }
        for (int64_t j = 0; j < dv; ++j) {
          T log_b = gv.present() ? gv.at(b, h, j) : T(0);
          if (refined_values) log_b += refined(j);
          if (value_gate.present()) log_b += log_sigmoid_gate(value_gate, value_gate_bias, j);
          decay_v[j] = std::exp(log_b);
        }
        // The state update and the read-out, row by row.
        const T* vr = v.row(b, h);
        const T* s_in = state + task * dv * dk;
        T* s_out = ps + task * dv * dk;
        T sum_squares = 0;
        for (int64_t j = 0; j < dv; ++j) {
          T dot = 0;
          for (int64_t c = 0; c < dk; ++c) {
            const T s = decay_v[j] * s_in[j * dk + c] * decay_k[c] + vr[j] * phi_k[c];
            s_out[j * dk + c] = s;
            dot += s * phi_q[c];
          }
          o[j] = dot;
          sum_squares += dot * dot;
        }
        const T rstd = options.output_norm
                           ? T(1) / std::sqrt(sum_squares / static_cast<T>(dv) + static_cast<T>(options.norm_eps))
                           : T(1);
        T* out_row = po + task * dv;
        for (int64_t j = 0; j < dv; ++j)
          out_row[j] = options.output_norm ? o[j] * rstd * (weight ? weight[j] : T(1)) : o[j];
      }
    });
  });
}

}  // namespace linea::cpu
