// One decoding token of a gated linear attention layer in one kernel (tensor/backend_kernels.def:
// linear_attention_step; cpu/linear_step.cpp is the oracle). Decoding one token of a small model
// is bound by the number of kernels, not by their work: the composite step of a ReGLA layer takes
// about a dozen (the query's and the key's maps, the running max, the refined gate, the scan, the
// norm, and the copies between them); this is one, for GLA's and Fast Decay's log-sigmoid gates too.
//
// One block per (batch, head), 16 warps. In shared memory: phi(q), phi(k), exp of the key-side
// and value-side log decays, v, and the read-out o. The block
//   1. loads q and k and takes their maxima (normalized exp: a warp max, then the warps' maxima
//      in warp order), then writes the maps and the decays, every thread a strided share of the
//      channels;
//   2. updates the state, a warp per row (its lanes along the contiguous key dim, so the reads and
//      writes of S are coalesced), each warp kRowsAtOnce rows at a time so that their loads are in
//      flight together (one row after another, a warp waited on every load: 12.8 us per layer on
//      an H200 at dk = dv = 64 with 8 warps), and sums each row's read-out by a warp butterfly;
//   3. normalizes o by the RMS of its dv entries (a block sum in warp order) and writes it.
// Every reduction combines in a fixed order: the same input gives the same bits on every run.
// The new state may be written over the old (new_state == state, the layer's decoding loop): each
// element is read, then written, by one thread, and the key max is written after a barrier that
// follows every read of it.
#include <cmath>

#include "cuda/kernels/rows.cuh"
#include "tensor/scalar_math.h"

namespace linea::cuda {

namespace {

constexpr int kWarps = 16;
constexpr int kRowsAtOnce = 4;  // rows of S a warp updates together
constexpr int kStepThreads = 32 * kWarps;

// A (B, H, width) input with a contiguous last dim; width 1 broadcasts over the channels.
template <class T>
struct HeadRows {
  const T* data;
  int64_t stride_b, stride_h, width;

  __device__ bool present() const { return data != nullptr; }
  __device__ const T* row(int64_t b, int64_t h) const { return data + b * stride_b + h * stride_h; }
  __device__ T at(int64_t b, int64_t h, int64_t c) const { return row(b, h)[width == 1 ? 0 : c]; }
};

template <class T>
HeadRows<T> head_rows(const Tensor& t) {
  if (!t.defined()) return {nullptr, 0, 0, 0};
  return {t.data<T>(), t.stride(0), t.stride(1), t.size(2)};
}

template <class T>
struct StepArgs {
  HeadRows<T> q, k, v, gk, gv, gate_a, gate_c, key_gate, value_gate;
  const T *bias_a, *bias_c, *key_gate_bias, *value_gate_bias, *key_max, *state, *norm_weight;
  T *out, *new_state, *new_key_max;
  int64_t heads, dk, dv;
  bool normalized_exp, refined_on_keys, output_norm;
  T scale, floor, normalizer, norm_eps;
};

// The block's max (NaN if any operand is) or sum of one value per thread, in warp order; every
// thread gets it. `scratch` holds kWarps values; the barriers make it reusable at once.
template <class T, bool kMax>
__device__ T block_reduce(T v, T* scratch) {
  v = kMax ? warp_max(v) : warp_sum(v);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  T total = scratch[0];
  for (int w = 1; w < kWarps; ++w) total = kMax ? scalar::max_nan(total, scratch[w]) : total + scratch[w];
  __syncthreads();
  return total;
}

template <class T>
__device__ T refined_decay(const StepArgs<T>& a, int64_t b, int64_t h, int64_t c, int64_t width) {
  const int64_t at = h * width + c;
  const T x = a.gate_a.row(b, h)[c] + (a.bias_a ? a.bias_a[at] : T(0));
  const T y = a.gate_c.row(b, h)[c] + (a.bias_c ? a.bias_c[at] : T(0));
  const T r = scalar::refined_log_gate(x, y).value;
  return r < a.floor ? a.floor : r;  // NaN stays NaN, as in refined_log_gate
}

// max(log sigmoid(x + bias) / normalizer, floor) for channel c of a (B, H, width) gate.
template <class T>
__device__ T log_sigmoid_decay(const StepArgs<T>& a, const HeadRows<T>& gate, const T* bias, int64_t b, int64_t h,
                               int64_t c) {
  const T x = gate.row(b, h)[c] + (bias ? bias[h * gate.width + c] : T(0));
  const T r = scalar::log_sigmoid(x) / a.normalizer;
  return r < a.floor ? a.floor : r;  // NaN stays NaN
}

template <class T>
__global__ void __launch_bounds__(kStepThreads) linear_step_kernel(StepArgs<T> a) {
  extern __shared__ unsigned char shared_bytes[];
  T* phi_q = reinterpret_cast<T*>(shared_bytes);
  T* phi_k = phi_q + a.dk;
  T* decay_k = phi_k + a.dk;
  T* decay_v = decay_k + a.dk;
  T* v = decay_v + a.dv;
  T* o = v + a.dv;
  T* scratch = o + a.dv;

  const int64_t task = blockIdx.x, b = task / a.heads, h = task % a.heads;
  // Launched overlapped (cuda/launch.cuh): while the kernel before this one runs, L2 fetches the
  // state, which this layer's step of the previous token wrote a whole step ago. Every input is an
  // earlier kernel's.
  const char* state_bytes = reinterpret_cast<const char*>(a.state + task * a.dv * a.dk);
  for (int64_t at = threadIdx.x * 128; at < a.dv * a.dk * static_cast<int64_t>(sizeof(T)); at += kStepThreads * 128)
    prefetch_to_l2(state_bytes + at);
  wait_for_prior_kernels();
  const T* qr = a.q.row(b, h);
  const T* kr = a.k.row(b, h);

  // 1. The maps and the decays.
  T q_shift = 0, k_shift = 0, lambda = 0;
  if (a.normalized_exp) {
    T mq = -INFINITY, mk = -INFINITY;
    for (int64_t c = threadIdx.x; c < a.dk; c += kStepThreads) {
      mq = scalar::max_nan(mq, qr[c]);
      mk = scalar::max_nan(mk, kr[c]);
    }
    q_shift = block_reduce<T, true>(mq, scratch);
    const T row_max = block_reduce<T, true>(mk, scratch);
    k_shift = row_max;
    if (a.key_max) {
      const T previous = a.key_max[task];
      if (!scalar::takes_over(row_max, previous)) k_shift = previous;
      lambda = previous - k_shift;
    }
  }
  const bool refined = a.gate_a.present();
  for (int64_t c = threadIdx.x; c < a.dk; c += kStepThreads) {
    phi_q[c] = a.normalized_exp ? a.scale * exp(qr[c] - q_shift) : a.scale * qr[c];
    phi_k[c] = a.normalized_exp ? exp(kr[c] - k_shift) : kr[c];
    T log_a = lambda + (a.gk.present() ? a.gk.at(b, h, c) : T(0));
    if (refined && a.refined_on_keys) log_a += refined_decay(a, b, h, c, a.dk);
    if (a.key_gate.present()) log_a += log_sigmoid_decay(a, a.key_gate, a.key_gate_bias, b, h, c);
    decay_k[c] = exp(log_a);
  }
  const T* vr = a.v.row(b, h);
  for (int64_t j = threadIdx.x; j < a.dv; j += kStepThreads) {
    T log_b = a.gv.present() ? a.gv.at(b, h, j) : T(0);
    if (refined && !a.refined_on_keys) log_b += refined_decay(a, b, h, j, a.dv);
    if (a.value_gate.present()) log_b += log_sigmoid_decay(a, a.value_gate, a.value_gate_bias, b, h, j);
    decay_v[j] = exp(log_b);
    v[j] = vr[j];
  }
  __syncthreads();
  // After the barrier: every thread has read key_max, which new_key_max may be (in place).
  if (a.normalized_exp && threadIdx.x == 0) a.new_key_max[task] = k_shift;

  // 2. The state, a warp per row.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Not __restrict__: the update may be in place; each element is read, then written, by one thread.
  const T* s_in = a.state + task * a.dv * a.dk;
  T* s_out = a.new_state + task * a.dv * a.dk;
  for (int64_t first = warp; first < a.dv; first += kWarps * kRowsAtOnce) {
    T dots[kRowsAtOnce] = {};
    for (int64_t c = lane; c < a.dk; c += 32) {
      const T key = phi_k[c], query = phi_q[c], key_decay = decay_k[c];
#pragma unroll
      for (int r = 0; r < kRowsAtOnce; ++r) {
        const int64_t j = first + r * kWarps;
        if (j < a.dv) {
          const T s = decay_v[j] * s_in[j * a.dk + c] * key_decay + v[j] * key;
          s_out[j * a.dk + c] = s;
          dots[r] += s * query;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsAtOnce; ++r) {
      const T dot = warp_sum(dots[r]);
      if (lane == 0 && first + r * kWarps < a.dv) o[first + r * kWarps] = dot;
    }
  }
  __syncthreads();

  // 3. The output norm.
  T rstd = 1;
  if (a.output_norm) {
    T squares = 0;
    for (int64_t j = threadIdx.x; j < a.dv; j += kStepThreads) squares += o[j] * o[j];
    const T total = block_reduce<T, false>(squares, scratch);
    rstd = T(1) / sqrt(total / static_cast<T>(a.dv) + a.norm_eps);
  }
  T* out = a.out + task * a.dv;
  for (int64_t j = threadIdx.x; j < a.dv; j += kStepThreads)
    out[j] = a.output_norm ? o[j] * rstd * (a.norm_weight ? a.norm_weight[j] : T(1)) : o[j];
}

}  // namespace

void CudaBackend::linear_attention_step(const LinearStepInputs& in, const LinearStepOptions& options,
                                        const Tensor& out, const Tensor& new_state, const Tensor& new_key_max) const {
  const char* op = "linear_attention_step";
  check_on_device(device_, op,
                  {&in.q, &in.k, &in.v, &in.gk, &in.gv, &in.gate_a, &in.gate_c, &in.gate_bias_a, &in.gate_bias_c,
                   &in.key_gate, &in.value_gate, &in.key_gate_bias, &in.value_gate_bias, &in.key_max, &in.state,
                   &in.norm_weight, &out, &new_state, &new_key_max});
  const cudaStream_t stream = use_device(device_);
  dispatch_floating(in.q.dtype(), op, [&]<class T>() {
    StepArgs<T> a{};
    a.q = head_rows<T>(in.q);
    a.k = head_rows<T>(in.k);
    a.v = head_rows<T>(in.v);
    a.gk = head_rows<T>(in.gk);
    a.gv = head_rows<T>(in.gv);
    a.gate_a = head_rows<T>(in.gate_a);
    a.gate_c = head_rows<T>(in.gate_c);
    a.key_gate = head_rows<T>(in.key_gate);
    a.value_gate = head_rows<T>(in.value_gate);
    a.key_gate_bias = data_or_null<T>(in.key_gate_bias);
    a.value_gate_bias = data_or_null<T>(in.value_gate_bias);
    a.bias_a = data_or_null<T>(in.gate_bias_a);
    a.bias_c = data_or_null<T>(in.gate_bias_c);
    a.key_max = data_or_null<T>(in.key_max);
    a.state = in.state.data<T>();
    a.norm_weight = data_or_null<T>(in.norm_weight);
    a.out = out.data<T>();
    a.new_state = new_state.data<T>();
    a.new_key_max = new_key_max.defined() ? new_key_max.data<T>() : nullptr;
    a.heads = in.q.size(1);
    a.dk = in.q.size(2);
    a.dv = in.v.size(2);
    a.normalized_exp = options.map == StepFeatureMap::NormalizedExp;
    a.refined_on_keys = options.refined_gate_on_keys;
    a.output_norm = options.output_norm;
    a.scale = static_cast<T>(options.scale);
    a.floor = static_cast<T>(options.gate_floor);
    a.normalizer = static_cast<T>(options.gate_normalizer);
    a.norm_eps = static_cast<T>(options.norm_eps);
    const int64_t tasks = in.q.size(0) * in.q.size(1);
    LINEA_CHECK(tasks <= INT32_MAX, op, "too many (batch, head) pairs: ", tasks);
    const size_t bytes = sizeof(T) * (3 * a.dk + 3 * a.dv + kWarps);
    launch_overlapped(linear_step_kernel<T>, dim3(static_cast<unsigned>(tasks)), kStepThreads, bytes, device_, stream,
                      op, a);
  });
}

}  // namespace linea::cuda
