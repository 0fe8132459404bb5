// One decoding token of a gated linear attention layer in one kernel (tensor/backend_kernels.def:
// linear_attention_step; cpu/linear_step.cpp is the oracle). Decoding one token of a small model
// is bound by the number of kernels, not by their work: the composite step of a ReGLA layer takes
// about a dozen (the query's and the key's maps, the running max, the refined gate, the scan, the
// norm, and the copies between them); this is one, for GLA's and Fast Decay's log-sigmoid gates too.
//
// One block per (batch, head), 16 warps. In shared memory: the maps phi(q), phi(k) and the
// key-side decay of every key channel (with the key side's log terms), the value-side decay and v
// of every value channel, and the read-out o. The block
//   0. asks for each warp's first tile of the state (into registers), while warp 0 prepares the
//      key side and warp 1 the value side: each asks for all of its inputs at once (one wait on
//      memory, not one per input), computes the gates' log terms, and warp 0 takes the maxima of
//      q and k (normalized exp) with its own butterfly and turns q, k and the log terms into
//      phi(q), phi(k) and the decay, once a channel;
//   1. updates the state, a warp per row (its lanes along the contiguous key dim, so the reads and
//      writes of S are coalesced), each warp kRowsAtOnce rows at a time so that their loads are in
//      flight together (one row after another, a warp waited on every load: 12.8 us per layer on
//      an H200 at dk = dv = 64 with 8 warps), and sums each row's read-out by a warp butterfly;
//   2. normalizes o by the RMS of its dv entries (every warp that writes outputs sums them itself,
//      in the same order) and writes it.
// A barrier of 16 warps is a link in the chain that decodes a token: the kernel has two, after the
// side warps' preparation and after the read-out. (It had nine: six in block-wide reductions, one
// after the maps.) The side warps' work was first spread over a thread a channel, with the maxima
// and the maps taken again by every warp for its lanes; on one H200 that took the node 3.8 us of a
// ReGLA layer's decoding step.
// Every reduction combines in a fixed order: the same input gives the same bits on every run.
// The new state may be written over the old (new_state == state, the layer's decoding loop): each
// element is read, then written, by one thread, and the key max is written after a barrier that
// follows every read of it.
#include <cmath>

#include "cuda/kernels/gated_scan.h"
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

constexpr int kChunksAtOnce = 2;  // 32-channel chunks a lane of a side's warp asks for together

// One side of the step's channels: the keys (q, k and the key-side gates, warp 0) or the values
// (v and the value-side gates, warp 1).
enum class Side { Keys, Values };

// The gates' parameters at a lane's channels first + lane + 32 i of one side (0 where absent):
// no kernel writes them, so the first ones are loaded before the wait.
template <class T>
struct SideBiases {
  T a[kChunksAtOnce], c[kChunksAtOnce], gate[kChunksAtOnce];
};

template <class T>
__device__ SideBiases<T> load_side_biases(const StepArgs<T>& a, Side side, int64_t h, int64_t first) {
  const bool keys = side == Side::Keys;
  const bool refined_here = a.gate_a.present() && a.refined_on_keys == keys;
  const int64_t width = keys ? a.dk : a.dv;
  const T* gate_bias = keys ? a.key_gate_bias : a.value_gate_bias;
  const int64_t gate_width = keys ? a.key_gate.width : a.value_gate.width;
  SideBiases<T> s;
#pragma unroll
  for (int i = 0; i < kChunksAtOnce; ++i) {
    const int64_t c = first + threadIdx.x % 32 + 32 * i;
    const bool refined = refined_here && c < width;
    s.a[i] = refined && a.bias_a ? __ldg(a.bias_a + h * width + c) : T(0);
    s.c[i] = refined && a.bias_c ? __ldg(a.bias_c + h * width + c) : T(0);
    s.gate[i] = gate_bias && c < gate_width ? __ldg(gate_bias + h * gate_width + c) : T(0);
  }
  return s;
}

// A lane's inputs of one side at its channels first + lane + 32 i, i < kChunksAtOnce (0 where
// absent or past the side's width): the map's input x (q, or v), k (the key side only), the given
// log decay g (gk or gv), the refined gate's two pre-activations (where it is on this side) and
// the log-sigmoid gate's pre-activation. Every load is issued before any value is used, as
// straight-line code: written as a loop that stored each input into shared memory before the next
// was asked for, or behind an `if` on an option, each load waited for the one before it, about
// six trips to L2 in a row (3,000 of the step's 7,500 cycles after the wait, clock64 on an H200).
template <class T>
struct SideInputs {
  T x[kChunksAtOnce], k[kChunksAtOnce], g[kChunksAtOnce], ga[kChunksAtOnce], gc[kChunksAtOnce], gate[kChunksAtOnce];
};

template <class T>
__device__ SideInputs<T> load_side(const StepArgs<T>& a, Side side, int64_t b, int64_t h, int64_t first) {
  const bool keys = side == Side::Keys;
  const int64_t width = keys ? a.dk : a.dv;
  const bool refined_here = a.gate_a.present() && a.refined_on_keys == keys;
  const HeadRows<T>& x = keys ? a.q : a.v;
  const HeadRows<T>& g = keys ? a.gk : a.gv;
  const HeadRows<T>& gate = keys ? a.key_gate : a.value_gate;
  SideInputs<T> in;
#pragma unroll
  for (int i = 0; i < kChunksAtOnce; ++i) {
    const int64_t c = first + threadIdx.x % 32 + 32 * i;
    const bool here = c < width;
    in.x[i] = here ? x.at(b, h, c) : T(0);
    in.k[i] = here && keys ? a.k.at(b, h, c) : T(0);
    in.g[i] = here && g.present() ? g.at(b, h, c) : T(0);
    in.ga[i] = here && refined_here ? a.gate_a.at(b, h, c) : T(0);
    in.gc[i] = here && refined_here ? a.gate_c.at(b, h, c) : T(0);
    in.gate[i] = here && gate.present() ? gate.at(b, h, c) : T(0);
  }
  return in;
}

// Calls f(c, inputs, biases, i) for each of the lane's channels c of one side (c = first + lane +
// 32 i), kChunksAtOnce chunks at a time, each group's loads in flight together.
template <class T, class F>
__device__ void for_each_side_channel(const StepArgs<T>& a, Side side, int64_t b, int64_t h,
                                      const SideBiases<T>& first_biases, F&& f) {
  const int64_t width = side == Side::Keys ? a.dk : a.dv;
  for (int64_t first = 0; first < width; first += 32 * kChunksAtOnce) {
    const SideBiases<T> bias = first == 0 ? first_biases : load_side_biases(a, side, h, first);
    const SideInputs<T> in = load_side(a, side, b, h, first);
#pragma unroll
    for (int i = 0; i < kChunksAtOnce; ++i) {
      const int64_t c = first + threadIdx.x % 32 + 32 * i;
      if (c >= width) break;
      f(c, in, bias, i);
    }
  }
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

// What the state update reads of each channel, in shared memory. The key side's arrays first
// hold the raw inputs and log terms; the key warp then turns q, k and gk in place into the maps
// and the key-side decay.
template <class T>
struct ChannelArrays {
  T *phi_q, *phi_k, *decay_k, *refined_k, *gated_k;  // dk each
  T *decay_v, *v, *o;                                // dv each
};

// Warp 0: every key channel's q, k and gate terms, kChunksAtOnce chunks a lane at a time with
// every load issued before any is used, then the maxima (normalized exp) by the warp's own
// butterfly, then phi_q, phi_k and decay_k in place. No other warp waits for the maxima, and the
// maps are computed once a channel (each of the 16 warps took them again for its lanes before).
// Returns k's shift (the running key max), which the caller writes after the barrier.
template <class T>
__device__ T prepare_keys(const StepArgs<T>& a, int64_t b, int64_t h, int64_t task, const SideBiases<T>& first_biases,
                          const ChannelArrays<T>& ch) {
  const int lane = threadIdx.x % 32;
  const T previous_max = a.key_max ? a.key_max[task] : T(0);
  const bool refined_here = a.gate_a.present() && a.refined_on_keys;
  T q_max = -INFINITY, k_max = -INFINITY;
  for_each_side_channel(a, Side::Keys, b, h, first_biases,
                        [&](int64_t c, const SideInputs<T>& in, const SideBiases<T>& bias, int i) {
                          q_max = scalar::max_nan(q_max, in.x[i]);
                          k_max = scalar::max_nan(k_max, in.k[i]);
                          ch.phi_q[c] = in.x[i];
                          ch.phi_k[c] = in.k[i];
                          ch.decay_k[c] = in.g[i];
                          ch.refined_k[c] =
                              refined_here ? refined_decay(a, in.ga[i] + bias.a[i], in.gc[i] + bias.c[i]) : T(0);
                          ch.gated_k[c] =
                              a.key_gate.present() ? log_sigmoid_decay(a, in.gate[i] + bias.gate[i]) : T(0);
                        });
  T q_shift = 0, k_shift = 0, lambda = 0;
  if (a.normalized_exp) {
    q_shift = warp_max(q_max);  // two independent butterflies, which the compiler interleaves
    k_shift = warp_max(k_max);
    if (a.key_max) {
      if (!scalar::takes_over(k_shift, previous_max)) k_shift = previous_max;
      lambda = previous_max - k_shift;
    }
  }
  // The lane's own channels again (its own writes: no barrier needed), in the CPU's order.
  for (int64_t c = lane; c < a.dk; c += 32) {
    const T q = ch.phi_q[c], k = ch.phi_k[c];
    ch.phi_q[c] = a.normalized_exp ? a.scale * exp(q - q_shift) : a.scale * q;
    ch.phi_k[c] = a.normalized_exp ? exp(k - k_shift) : k;
    ch.decay_k[c] = exp(lambda + ch.decay_k[c] + ch.refined_k[c] + ch.gated_k[c]);  // absent terms add an exact 0
  }
  return k_shift;
}

// Warp 1: every value channel's v and its decay exp(gv + refined + gated) (the terms in the CPU's
// order), with the loads of kChunksAtOnce chunks a lane issued before any is used.
template <class T>
__device__ void prepare_values(const StepArgs<T>& a, int64_t b, int64_t h, const SideBiases<T>& first_biases,
                               const ChannelArrays<T>& ch) {
  const bool refined_here = a.gate_a.present() && !a.refined_on_keys;
  for_each_side_channel(a, Side::Values, b, h, first_biases,
                        [&](int64_t c, const SideInputs<T>& in, const SideBiases<T>& bias, int i) {
                          T log_b = in.g[i];
                          if (refined_here) log_b += refined_decay(a, in.ga[i] + bias.a[i], in.gc[i] + bias.c[i]);
                          if (a.value_gate.present()) log_b += log_sigmoid_decay(a, in.gate[i] + bias.gate[i]);
                          ch.decay_v[c] = exp(log_b);
                          ch.v[c] = in.x[i];
                        });
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
  ChannelArrays<T> ch;
  ch.phi_q = reinterpret_cast<T*>(shared_bytes);
  ch.phi_k = ch.phi_q + a.dk;
  ch.decay_k = ch.phi_k + a.dk;
  ch.refined_k = ch.decay_k + a.dk;
  ch.gated_k = ch.refined_k + a.dk;
  ch.decay_v = ch.gated_k + a.dk;
  ch.v = ch.decay_v + a.dv;
  ch.o = ch.v + a.dv;

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
  // So is the running key max, which warp 0 reads after its wait, before the maxima. A step ago it
  // was in L2; since then the step's weights have streamed through it.
  if (a.key_max && threadIdx.x == 0) prefetch_to_l2(a.key_max + task);
  // The parameters are no kernel's output: the output norm's gain at the thread's first channel and
  // the side warps' first gate biases are loaded now (read after the wait, each was a trip to
  // memory in the chain that decodes a token).
  const T first_gain = a.norm_weight && threadIdx.x < a.dv ? __ldg(a.norm_weight + threadIdx.x) : T(1);
  SideBiases<T> first_biases{};
  if (warp < 2) first_biases = load_side_biases(a, warp == 0 ? Side::Keys : Side::Values, h, 0);
  wait_for_prior_kernels();

  // 0. Every warp asks for its first tile of the state; warp 0 prepares the key side (and takes
  // the maxima), warp 1 the value side, each with all of its loads in flight at once.
  StateTile<T> first_tile;
  first_tile.load(s_in, warp, 0, lane, a.dk, a.dv);
  T k_shift = 0;
  if (warp == 0) k_shift = prepare_keys(a, b, h, task, first_biases, ch);
  if (warp == 1) prepare_values(a, b, h, first_biases, ch);
  __syncthreads();
  // After the barrier: warp 0 has read key_max, which new_key_max may be (in place).
  if (a.normalized_exp && threadIdx.x == 0) a.new_key_max[task] = k_shift;

  // 1. The state, a warp per row, kRowsAtOnce rows at a time so that their loads are in flight
  // together (one row after another, a warp waited on every load: 12.8 us per layer on an H200 at
  // dk = dv = 64 with 8 warps), and each row's read-out summed by a warp butterfly.
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
        phi_q[q] = ch.phi_q[c];
        phi_k[q] = ch.phi_k[c];
        decay_k[q] = ch.decay_k[c];
      }
#pragma unroll
      for (int r = 0; r < kRowsAtOnce; ++r) {
        const int64_t j = first + r * kWarps;
#pragma unroll
        for (int q = 0; q < kTileChunks; ++q) {
          const int64_t c = c0 + lane + 32 * q;
          if (j < a.dv && c < a.dk) {
            const T s = ch.decay_v[j] * tile.s[r][q] * decay_k[q] + ch.v[j] * phi_k[q];
            s_out[j * a.dk + c] = s;
            dots[r] += s * phi_q[q];
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsAtOnce; ++r) {
      const T dot = warp_sum(dots[r]);
      if (lane == 0 && first + r * kWarps < a.dv) ch.o[first + r * kWarps] = dot;
    }
  }
  __syncthreads();

  // 2. The output norm, by the warps that write outputs (every one sums the squares itself).
  if (warp * 32 >= a.dv) return;
  T rstd = 1;
  if (a.output_norm) {
    const T total = warp_sum_squares(ch.o, a.dv);
    rstd = T(1) / sqrt(total / static_cast<T>(a.dv) + a.norm_eps);
  }
  T* out = a.out + task * a.dv;
  for (int64_t j = threadIdx.x; j < a.dv; j += kStepThreads) {
    const T gain = j == threadIdx.x ? first_gain : a.norm_weight ? a.norm_weight[j] : T(1);
    out[j] = a.output_norm ? ch.o[j] * rstd * gain : ch.o[j];
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
    set_recurrence_inputs(a, in, head_rows<T>);
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
