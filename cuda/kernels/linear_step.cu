// One decoding token of a gated linear attention layer in one kernel (tensor/backend_kernels.def:
// linear_attention_step; cpu/linear_step.cpp is the oracle). Decoding one token of a small model
// is bound by the number of kernels, not by their work: the composite step of a ReGLA layer takes
// about a dozen (the query's and the key's maps, the running max, the refined gate, the scan, the
// norm, and the copies between them); this is one, for GLA's and Fast Decay's log-sigmoid gates too.
//
// One block per (batch, head), 16 warps. In shared memory: q and k as they come, the key side's
// three log-decay terms, exp of the value side's log decay, v, and the read-out o. The block
//   0. asks for every input at once, a thread a channel: q, k, v and the gates into registers (then
//      shared memory), the key max and each warp's first tile of the state into registers (one wait
//      on memory, not one per input), and takes each warp's part of the maxima of q and k;
//   1. folds the warps' parts of the maxima (normalized exp), every thread for itself;
//   2. updates the state, a warp per row (its lanes along the contiguous key dim, so the reads and
//      writes of S are coalesced), each warp kRowsAtOnce rows at a time so that their loads are in
//      flight together (one row after another, a warp waited on every load: 12.8 us per layer on
//      an H200 at dk = dv = 64 with 8 warps), with the maps and the key-side decays of its lanes'
//      channels computed by the warp itself, and sums each row's read-out by a warp butterfly;
//   3. normalizes o by the RMS of its dv entries (every warp sums them itself, in the same order)
//      and writes it.
// A barrier of 16 warps is a link in the chain that decodes a token: the kernel has two, after the
// loads and after the read-out. (It had nine: six in block-wide reductions, one after the maps.)
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
constexpr int kTileChunks = 2;  // and their 32-channel chunks (64 key channels: one tile at dk = 64)
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

// The sum of squares of x[0..n), a warp's lanes striding over it then a butterfly: every lane of
// every warp that calls it gets the same value, with no barrier.
template <class T>
__device__ T warp_sum_squares(const T* x, int64_t n) {
  T v = T(0);
  for (int64_t c = threadIdx.x % 32; c < n; c += 32) v += x[c] * x[c];
  return warp_sum(v);
}

// The parameters of channel c's gates (0 where absent): no kernel writes them, so they are loaded
// before the wait.
template <class T>
struct ChannelBiases {
  T a, c, key_gate, value_gate;
};

template <class T>
__device__ ChannelBiases<T> load_biases(const StepArgs<T>& a, int64_t h, int64_t c) {
  const int64_t refined_width = a.refined_on_keys ? a.dk : a.dv;
  const auto at = [&](const T* bias, int64_t width) { return bias && c < width ? __ldg(bias + h * width + c) : T(0); };
  return {at(a.bias_a, refined_width), at(a.bias_c, refined_width), at(a.key_gate_bias, a.key_gate.width),
          at(a.value_gate_bias, a.value_gate.width)};
}

// Channel c's inputs from the kernels before this one (0 where absent or past the width). Every
// load is issued before any value is used, as straight-line code with no branch between the loads:
// written as a loop that stored each input into shared memory before the next was asked for, or
// behind an `if` on an option, each load waited on the one before it, and the phase made about six
// trips to L2 in a row (3,000 cycles of the step's 7,500 after the wait, clock64 on an H200).
template <class T>
struct ChannelInputs {
  T q, k, gk, key_gate, v, gv, value_gate, gate_a, gate_c;
};

template <class T>
__device__ ChannelInputs<T> load_channel(const StepArgs<T>& a, int64_t b, int64_t h, int64_t c) {
  const bool key = c < a.dk, value = c < a.dv;
  const bool refined = a.gate_a.present() && c < (a.refined_on_keys ? a.dk : a.dv);
  const auto at = [&](const HeadRows<T>& rows, bool wanted) { return wanted ? rows.at(b, h, c) : T(0); };
  return {at(a.q, key),          at(a.k, key),
          at(a.gk, key && a.gk.present()),
          at(a.key_gate, key && a.key_gate.present()),
          at(a.v, value),        at(a.gv, value && a.gv.present()),
          at(a.value_gate, value && a.value_gate.present()),
          at(a.gate_a, refined), at(a.gate_c, refined)};
}

// max(log sigmoid(x) / normalizer, floor): a GLA or Fast Decay gate's log decay from its
// pre-activation x (plus bias).
template <class T>
__device__ T log_sigmoid_decay(const StepArgs<T>& a, T x) {
  const T r = scalar::log_sigmoid(x) / a.normalizer;
  return r < a.floor ? a.floor : r;  // NaN stays NaN
}

// ReGLA's refined gate in log space, floored (NaN stays NaN, as in refined_log_gate).
template <class T>
__device__ T refined_decay(const StepArgs<T>& a, T x, T y) {
  const T r = scalar::refined_log_gate(x, y).value;
  return r < a.floor ? a.floor : r;
}

// The max (NaN if any is) of x and of y over a warp's lanes, the two butterflies interleaved.
template <class T>
__device__ void warp_max_pair(T& x, T& y) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const T other_x = __shfl_xor_sync(0xffffffffu, x, offset), other_y = __shfl_xor_sync(0xffffffffu, y, offset);
    x = scalar::max_nan(x, other_x);
    y = scalar::max_nan(y, other_y);
  }
}

// A warp's share of S it updates at once: kRowsAtOnce rows (first + r * kWarps) by kTileColumns
// key channels (c0 + lane + 32 * q), in registers.
template <class T>
struct StateTile {
  T s[kRowsAtOnce][kTileChunks];

  __device__ void load(const T* s_in, int64_t first, int64_t c0, int lane, int64_t dk, int64_t dv) {
#pragma unroll
    for (int r = 0; r < kRowsAtOnce; ++r)
#pragma unroll
      for (int q = 0; q < kTileChunks; ++q) {
        const int64_t j = first + r * kWarps, c = c0 + lane + 32 * q;
        s[r][q] = j < dv && c < dk ? s_in[j * dk + c] : T(0);
      }
  }
};

template <class T>
__global__ void __launch_bounds__(kStepThreads) linear_step_kernel(StepArgs<T> a) {
  extern __shared__ unsigned char shared_bytes[];
  T* q_raw = reinterpret_cast<T*>(shared_bytes);
  T* k_raw = q_raw + a.dk;
  T* log_decay_k = k_raw + a.dk;  // the key-side gate's three log terms
  T* refined_k = log_decay_k + a.dk;
  T* gated_k = refined_k + a.dk;
  T* decay_v = gated_k + a.dk;
  T* v = decay_v + a.dv;
  T* o = v + a.dv;

  const int64_t task = blockIdx.x, b = task / a.heads, h = task % a.heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Launched overlapped (cuda/launch.cuh): while the kernel before this one runs, L2 fetches the
  // state, which this layer's step of the previous token wrote a whole step ago. Every input is an
  // earlier kernel's.
  // Not __restrict__: the update may be in place; each element is read, then written, by one thread.
  const T* s_in = a.state + task * a.dv * a.dk;
  T* s_out = a.new_state + task * a.dv * a.dk;
  const char* state_bytes = reinterpret_cast<const char*>(s_in);
  for (int64_t at = threadIdx.x * 128; at < a.dv * a.dk * static_cast<int64_t>(sizeof(T)); at += kStepThreads * 128)
    prefetch_to_l2(state_bytes + at);
  // The parameters are no kernel's output: the output norm's gain and the gates' biases at the
  // thread's first channel are loaded now (read after the wait, each was a trip to memory in the
  // chain that decodes a token).
  const T first_gain = a.norm_weight && threadIdx.x < a.dv ? __ldg(a.norm_weight + threadIdx.x) : T(1);
  const ChannelBiases<T> first_biases = load_biases(a, h, threadIdx.x);
  __shared__ T q_max_part[kWarps], k_max_part[kWarps];  // each warp's maxima over its channels
  wait_for_prior_kernels();

  // 0. The loads: the state's first tile, the key max and every channel input are asked for here,
  // before any is used, so that the kernel waits on memory once. Each thread then computes its
  // channels' gate terms (kept apart and summed below in the CPU's order, so both give the same
  // bits) and its warp's part of the maxima of q and k.
  StateTile<T> first_tile;
  first_tile.load(s_in, warp, 0, lane, a.dk, a.dv);
  const T previous_max = a.key_max ? a.key_max[task] : T(0);
  T q_max = -INFINITY, k_max = -INFINITY;
  for (int64_t c = threadIdx.x; c < a.dk || c < a.dv; c += kStepThreads) {
    const ChannelInputs<T> in = load_channel(a, b, h, c);
    const ChannelBiases<T> bias = c == threadIdx.x ? first_biases : load_biases(a, h, c);
    const T refined = a.gate_a.present() ? refined_decay(a, in.gate_a + bias.a, in.gate_c + bias.c) : T(0);
    if (c < a.dk) {
      q_raw[c] = in.q;
      k_raw[c] = in.k;
      q_max = scalar::max_nan(q_max, in.q);
      k_max = scalar::max_nan(k_max, in.k);
      log_decay_k[c] = in.gk;
      refined_k[c] = a.refined_on_keys ? refined : T(0);
      gated_k[c] = a.key_gate.present() ? log_sigmoid_decay(a, in.key_gate + bias.key_gate) : T(0);
    }
    if (c < a.dv) {
      T log_b = in.gv;
      if (a.gate_a.present() && !a.refined_on_keys) log_b += refined;
      if (a.value_gate.present()) log_b += log_sigmoid_decay(a, in.value_gate + bias.value_gate);
      decay_v[c] = exp(log_b);
      v[c] = in.v;
    }
  }
  if (a.normalized_exp) {
    warp_max_pair(q_max, k_max);
    if (lane == 0) q_max_part[warp] = q_max, k_max_part[warp] = k_max;
  }
  __syncthreads();

  // 1. The maxima of q and k (normalized exp): every thread folds the warps' parts in order.
  T q_shift = 0, k_shift = 0, lambda = 0;
  if (a.normalized_exp) {
    q_shift = q_max_part[0];
    T row_max = k_max_part[0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) {
      if (w * 32 >= a.dk) break;
      q_shift = scalar::max_nan(q_shift, q_max_part[w]);
      row_max = scalar::max_nan(row_max, k_max_part[w]);
    }
    k_shift = row_max;
    if (a.key_max) {
      if (!scalar::takes_over(row_max, previous_max)) k_shift = previous_max;
      lambda = previous_max - k_shift;
    }
  }
  // After the barrier above: every thread has read key_max, which new_key_max may be (in place).
  if (a.normalized_exp && threadIdx.x == 0) a.new_key_max[task] = k_shift;

  // 2. The state, a warp per row, kRowsAtOnce rows at a time so that their loads are in flight
  // together (one row after another, a warp waited on every load: 12.8 us per layer on an H200 at
  // dk = dv = 64 with 8 warps), and each row's read-out summed by a warp butterfly. The maps and the
  // key-side decays at the lane's channels are computed by each warp for itself (three exponentials
  // a channel), so that no barrier waits on them.
  for (int64_t first = warp; first < a.dv; first += kWarps * kRowsAtOnce) {
    T dots[kRowsAtOnce] = {};
    for (int64_t c0 = 0; c0 < a.dk; c0 += 32 * kTileChunks) {
      StateTile<T> tile = first_tile;
      if (first != warp || c0 != 0) tile.load(s_in, first, c0, lane, a.dk, a.dv);
      T phi_q[kTileChunks] = {}, phi_k[kTileChunks] = {}, decay_k[kTileChunks] = {};
#pragma unroll
      for (int q = 0; q < kTileChunks; ++q) {
        const int64_t c = c0 + lane + 32 * q;
        if (c >= a.dk) continue;
        phi_q[q] = a.normalized_exp ? a.scale * exp(q_raw[c] - q_shift) : a.scale * q_raw[c];
        phi_k[q] = a.normalized_exp ? exp(k_raw[c] - k_shift) : k_raw[c];
        decay_k[q] = exp(lambda + log_decay_k[c] + refined_k[c] + gated_k[c]);  // absent terms add an exact 0
      }
#pragma unroll
      for (int r = 0; r < kRowsAtOnce; ++r) {
        const int64_t j = first + r * kWarps;
#pragma unroll
        for (int q = 0; q < kTileChunks; ++q) {
          const int64_t c = c0 + lane + 32 * q;
          if (j < a.dv && c < a.dk) {
            const T s = decay_v[j] * tile.s[r][q] * decay_k[q] + v[j] * phi_k[q];
            s_out[j * a.dk + c] = s;
            dots[r] += s * phi_q[q];
          }
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
    const T total = warp_sum_squares(o, a.dv);
    rstd = T(1) / sqrt(total / static_cast<T>(a.dv) + a.norm_eps);
  }
  T* out = a.out + task * a.dv;
  for (int64_t j = threadIdx.x; j < a.dv; j += kStepThreads) {
    const T gain = j == threadIdx.x ? first_gain : a.norm_weight ? a.norm_weight[j] : T(1);
    out[j] = a.output_norm ? o[j] * rstd * gain : o[j];
  }
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
    const size_t bytes = sizeof(T) * (5 * a.dk + 3 * a.dv);
    launch_overlapped(linear_step_kernel<T>, dim3(static_cast<unsigned>(tasks)), kStepThreads, bytes, device_, stream,
                      op, a);
  });
}

}  // namespace linea::cuda
