// A decoding step's matrix product with its input norm, activation and residual folded in
// (tensor/backend_kernels.def: fused_linear; cpu/fused_linear.cpp is the oracle).
//
// At batch 1 a product is a matrix-vector product: every weight is read once and used once, so
// the kernel's whole job is to stream the weights at the memory's bandwidth, and to do in the same
// launch what would otherwise be launches of their own (a decoding step is bound by how many
// kernels it runs, docs/benchmarks.md). Each warp owns one output: its lanes read the output's row
// of weights in 16-byte loads, many in flight at once, against the input rows staged in shared
// memory, and the warp's sum goes through the epilogue (bias, activation, a gated unit's second
// product, the residual) in one lane per input row. (Several warps sharing an output, so that a
// matrix of few outputs has more warps in flight, measured no faster on the H200, except for one
// input row longer than a batch of loads: fused_linear_row.cuh, spans_per_row_log2.)
//
// The input rows are staged once per block in shared memory and normed there (the statistics in
// double, as the norm kernels compute them): every block reads the few input rows again, which
// costs far less than a separate norm kernel. Rows too long for the shared memory are staged in
// parts, normed on the way from statistics read from global memory. The kernel is launched to
// overlap the one before it (cuda/launch.cuh): its warps load their first weights, and L2 fetches
// more, while that kernel still runs. Up to 4 input rows go through one launch
// (more take several; the op gives more than that to cuBLAS, which reads the weights once for
// all rows). One input row, the batch-1 decoding step, has a kernel of its own
// (fused_linear_row.cuh): one barrier after the wait instead of three, each warp norming the row
// in registers. What the two share, the weights' loads, is in fused_linear_weights.cuh.
// fused_linear_from_splits (attention_splits.h) runs the one-row kernel with its row merged from
// a cached attention step's splits.
// Every sum is combined in a fixed order: the same input gives the same bits on every run.
#include <algorithm>
#include <cstdint>

#include "cuda/kernels/fused_linear_row.cuh"
#include "cuda/kernels/fused_linear_weights.cuh"

namespace linea::cuda {

namespace {

constexpr int64_t kMaxRowsPerLaunch = 4;

// acc[n] += w . staged row n (kWidth elements at column c of the stage).
template <class T, int kRows, int kWidth>
__device__ __forceinline__ void accumulate(T (&acc)[kRows], const Pack<T, kWidth>& w, const T* staged, int64_t stage,
                                           int64_t c) {
#pragma unroll
  for (int n = 0; n < kRows; ++n) {
    const Pack<T, kWidth> x = *reinterpret_cast<const Pack<T, kWidth>*>(staged + n * stage + c);
#pragma unroll
    for (int e = 0; e < kWidth; ++e) acc[n] += w.v[e] * x.v[e];
  }
}

// Each row's mean and 1/std (mean 0 for RMS), one warp per row, from rows[n * stride + c]: the
// input in global memory, or its copy in shared memory.
template <class T, int kRows, int kWarps>
__device__ void row_statistics(const ProductArgs<T>& a, const T* rows, int64_t stride, double (&mean)[kRows],
                               double (&rstd)[kRows]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int n = warp; n < a.rows; n += kWarps) {
    const T* row = rows + n * stride;
    double mu = 0, sq = 0;
    if (a.norm == RowNorm::Layer) {
      for (int64_t c = lane; c < a.in; c += 32) mu += row[c];
      mu = warp_sum(mu) / a.in;
    }
    for (int64_t c = lane; c < a.in; c += 32) sq += (row[c] - mu) * (row[c] - mu);
    sq = warp_sum(sq);
    if (lane == 0) {
      mean[n] = mu;
      rstd[n] = norm_rstd(sq, static_cast<double>(a.in), a.eps);
    }
  }
}

// Columns [start, start + len) of every input row into staged (kRows x stage), normed when
// `normed` (the statistics known), else as they are; the rows past a.rows are zeros, so the
// products read them without a test.
template <class T, int kRows, int kWarps>
__device__ void stage_rows(const ProductArgs<T>& a, const double (&mean)[kRows], const double (&rstd)[kRows],
                           int64_t start, int64_t len, bool normed, T* staged) {
#pragma unroll
  for (int n = 0; n < kRows; ++n) {
    for (int64_t i = threadIdx.x; i < len; i += 32 * kWarps) {
      T v = T(0);
      if (n < a.rows) {
        v = a.x[n * a.x_stride + start + i];
        if (normed) v = normed_value(v, mean[n], rstd[n], a.norm_weight, a.norm_bias, start + i);
      }
      staged[n * a.stage + i] = v;
    }
  }
}

// The input norm's gain and shift at the thread's first kNormRegisters staged channels
// (threadIdx.x + i * threads), loaded before the kernel waits for its input: they are parameters,
// no earlier kernel's output, and read after the wait they were a trip to memory between the
// statistics and the products.
constexpr int kNormRegisters = 4;

template <class T, int kWarps>
struct NormParameters {
  T gain[kNormRegisters], shift[kNormRegisters];

  __device__ __forceinline__ void load(const ProductArgs<T>& a) {
#pragma unroll
    for (int i = 0; i < kNormRegisters; ++i) {
      const int64_t c = threadIdx.x + i * 32 * kWarps;
      gain[i] = a.norm_weight && c < a.in ? __ldg(a.norm_weight + c) : T(1);
      shift[i] = a.norm_bias && c < a.in ? __ldg(a.norm_bias + c) : T(0);
    }
  }
};

// The whole rows, staged as they are, normed in place.
template <class T, int kRows, int kWarps>
__device__ void norm_staged(const ProductArgs<T>& a, const double (&mean)[kRows], const double (&rstd)[kRows],
                            const NormParameters<T, kWarps>& params, T* staged) {
  constexpr int64_t kThreads = 32 * kWarps;
  for (int n = 0; n < a.rows; ++n) {
#pragma unroll
    for (int i = 0; i < kNormRegisters; ++i) {
      const int64_t c = threadIdx.x + i * kThreads;
      if (c < a.in)
        staged[n * a.stage + c] =
            normed_value(staged[n * a.stage + c], mean[n], rstd[n], params.gain[i], params.shift[i],
                         a.norm_bias != nullptr);
    }
    for (int64_t c = threadIdx.x + kNormRegisters * kThreads; c < a.in; c += kThreads)
      staged[n * a.stage + c] = normed_value(staged[n * a.stage + c], mean[n], rstd[n], a.norm_weight, a.norm_bias, c);
  }
}

template <class T, int kRows, int kWidth, bool kGated>
__device__ __forceinline__ void use_batch(const WeightBatch<T, kWidth, kGated>& b, const T* staged, int64_t stage,
                                          int64_t base, int64_t len, T (&acc)[kRows], T (&up)[kRows]) {
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    const int64_t c = base + k * 32 * kWidth;
    if (c >= len) continue;
    accumulate<T, kRows, kWidth>(acc, b.w[k], staged, stage, c);
    if constexpr (kGated) accumulate<T, kRows, kWidth>(up, b.u[k], staged, stage, c);
  }
}

// The products with the part's columns; `first`, when `preloaded`, is its first batch, loaded
// before the kernel waited for its input (fused_linear_kernel).
template <class T, int kRows, int kWidth, bool kGated>
__device__ __forceinline__ void dot_row(const T* w_row, const T* u_row, const T* staged, int64_t stage, int64_t len,
                                        const WeightBatch<T, kWidth, kGated>& first, bool preloaded, T (&acc)[kRows],
                                        T (&up)[kRows]) {
  const int64_t lane_column = (threadIdx.x % 32) * kWidth;
  int64_t base = lane_column;
  if (preloaded) {
    use_batch<T, kRows, kWidth, kGated>(first, staged, stage, base, len, acc, up);
    base += kBatchColumns<kWidth>;
  }
  for (; base < len; base += kBatchColumns<kWidth>) {
    WeightBatch<T, kWidth, kGated> b;
    load_batch<T, kWidth, kGated>(b, w_row, u_row, base, len);
    use_batch<T, kRows, kWidth, kGated>(b, staged, stage, base, len, acc, up);
  }
}

// Grid-stride over groups of kWarps outputs; warp w of a block computes output group * kWarps + w
// for every input row at once. Launched overlapped (cuda/launch.cuh): the weights are no earlier
// kernel's output, so each warp loads the first batch of its first row, and asks L2 for more,
// while the kernel before it still runs; then it waits, and stages the input rows.
template <class T, int kRows, int kWidth, bool kGated, int kWarps = warps_per_block(kGated)>
__global__ void __launch_bounds__(32 * kWarps) fused_linear_kernel(ProductArgs<T> a) {
  extern __shared__ __align__(16) unsigned char shared[];
  T* staged = reinterpret_cast<T*>(shared);
  __shared__ double mean[kRows], rstd[kRows];
  const int warp = threadIdx.x / 32;
  const bool normed = a.norm != RowNorm::None;
  const int64_t first = blockIdx.x * kWarps + warp;
  const bool preloaded = first < a.outputs;
  const int lane = threadIdx.x % 32;
  const int64_t groups = (a.outputs + kWarps - 1) / kWarps;
  WeightBatch<T, kWidth, kGated> batch;
  T first_bias = T(0), first_up_bias = T(0);  // the first output's biases, lane n for input row n
  if (preloaded) {
    const T* w_row = a.weight + first * a.in;
    const T* u_row = kGated ? a.up_weight + first * a.in : nullptr;
    load_batch<T, kWidth, kGated>(batch, w_row, u_row, lane * kWidth, std::min(a.in, a.stage));
    const int64_t rest = a.in < kBatchColumns<kWidth> ? a.in : kBatchColumns<kWidth>;  // (by value: no ODR use)
    prefetch_row(w_row, rest, a.in);
    if constexpr (kGated) prefetch_row(u_row, rest, a.in);
    if (lane < a.rows && a.bias) first_bias = __ldg(a.bias + first);
    if (kGated && lane < a.rows && a.up_bias) first_up_bias = __ldg(a.up_bias + first);
  }
  prefetch_later_rows<T, kWarps, kGated>(a, groups);
  // The whole rows fit: stage them once for every group, and take the statistics from there.
  const bool staged_once = a.stage >= a.in;
  NormParameters<T, kWarps> norm_params;
  if (normed && staged_once) norm_params.load(a);
  wait_for_prior_kernels();  // x and the residual are an earlier kernel's output
  if (staged_once) {
    stage_rows<T, kRows, kWarps>(a, mean, rstd, 0, a.in, false, staged);
    if (normed) {
      __syncthreads();
      row_statistics<T, kRows, kWarps>(a, staged, a.stage, mean, rstd);
      __syncthreads();
      norm_staged<T, kRows, kWarps>(a, mean, rstd, norm_params, staged);
    }
  } else if (normed) {
    row_statistics<T, kRows, kWarps>(a, a.x, a.x_stride, mean, rstd);
  }

  for (int64_t group = blockIdx.x; group < groups; group += gridDim.x) {
    const int64_t j = group * kWarps + warp;
    const bool active = j < a.outputs;
    const T* w_row = a.weight + (active ? j : 0) * a.in;
    const T* u_row = kGated ? a.up_weight + (active ? j : 0) * a.in : nullptr;
    // The epilogue's operands, lane n for input row n: asked for now, so that their trip to memory
    // overlaps the products instead of following them (the first group's biases came before the
    // wait).
    const bool ends_row = active && lane < a.rows, first_group = group == blockIdx.x;
    const T bias = first_group ? first_bias : ends_row && a.bias ? a.bias[j] : T(0);
    const T up_bias = first_group ? first_up_bias : kGated && ends_row && a.up_bias ? a.up_bias[j] : T(0);
    const T residual = ends_row && a.residual ? a.residual[lane * a.residual_stride + j] : T(0);
    T acc[kRows] = {}, up[kRows] = {};
    for (int64_t start = 0; start < a.in; start += a.stage) {
      const int64_t len = a.in - start < a.stage ? a.in - start : a.stage;
      if (!staged_once) {
        __syncthreads();  // every warp is done with the previous part (and the statistics are in)
        stage_rows<T, kRows, kWarps>(a, mean, rstd, start, len, normed, staged);
      }
      __syncthreads();
      if (active)
        dot_row<T, kRows, kWidth, kGated>(w_row + start, u_row ? u_row + start : nullptr, staged, a.stage, len, batch,
                                          group == blockIdx.x && start == 0, acc, up);
    }
    if (!active) continue;
#pragma unroll
    for (int n = 0; n < kRows; ++n) {
      acc[n] = warp_sum(acc[n]);
      if constexpr (kGated) up[n] = warp_sum(up[n]);
    }
#pragma unroll
    for (int n = 0; n < kRows; ++n) {
      if (n >= a.rows || lane != n) continue;
      T v = acc[n] + bias;
      if (a.activate) v = activation_value(a.activation, v);
      if constexpr (kGated) v *= up[n] + up_bias;
      if (a.residual) v += residual;
      a.out[n * a.outputs + j] = v;
    }
  }
}

// Where the kernels go: the grid, the device and its stream.
struct Placement {
  unsigned blocks;
  int device;
  cudaStream_t stream;
};

template <class T, int kRows, int kWidth>
void launch_rows(const ProductArgs<T>& a, bool gated, const Placement& at) {
  const size_t bytes = static_cast<size_t>(kRows * a.stage) * sizeof(T);
  if (gated)
    launch_overlapped(fused_linear_kernel<T, kRows, kWidth, true>, dim3(at.blocks), 32 * warps_per_block(true), bytes,
                      at.device, at.stream, "fused_linear", a);
  else
    launch_overlapped(fused_linear_kernel<T, kRows, kWidth, false>, dim3(at.blocks), 32 * warps_per_block(false),
                      bytes, at.device, at.stream, "fused_linear", a);
}

// Up to kMaxRowsPerLaunch rows: the smallest kernel that holds them.
template <class T, int kWidth>
void launch(ProductArgs<T> a, bool gated, const Placement& at) {
  if (takes_one_row<T, kWidth>(a.rows, a.in, a.norm, gated)) {
    constexpr int kWarps = warps_per_block(false);
    // The staged row, and the split weights of an attention step's splits (x null: the row is
    // merged from them, by the kernel that takes pairs; takes_attention_splits).
    const int64_t split_weights = a.x == nullptr ? a.in / a.splits.dh * kMaxMergedSplits : 0;
    const size_t bytes = static_cast<size_t>(a.in + split_weights) * sizeof(T);
    a.spans_log2 = spans_per_row_log2<kWidth>(a.in, a.outputs, a.norm, kWarps * int64_t{sm_count(at.device)});
    if (a.spans_log2 > 0) {
      const auto one_pass = static_cast<unsigned>(ceil_div(a.outputs << a.spans_log2, kWarps));
      launch_overlapped(fused_row_kernel<T, kWidth, RowWork::Spans>, dim3(one_pass), 32 * kWarps, bytes, at.device,
                        at.stream, "fused_linear", a);
    } else if (takes_pairs<T, kWidth>(a.in, a.outputs)) {
      // The fewest blocks that give every warp a pair, at most one an SM (more pairs a warp after).
      const auto pairs = static_cast<unsigned>(std::min<int64_t>(ceil_div(a.outputs, 2 * kWarps), at.blocks));
      launch_overlapped(fused_row_kernel<T, kWidth, RowWork::Pairs>, dim3(pairs), 32 * kWarps, bytes, at.device,
                        at.stream, "fused_linear", a);
    } else {
      launch_overlapped(fused_row_kernel<T, kWidth, RowWork::Whole>, dim3(at.blocks), 32 * kWarps, bytes, at.device,
                        at.stream, "fused_linear", a);
    }
    return;
  }
  const int64_t max_rows = a.rows <= 1 ? 1 : kMaxRowsPerLaunch;
  a.stage = std::min<int64_t>(a.in, kStageBytes / (max_rows * static_cast<int64_t>(sizeof(T))) / kWidth * kWidth);
  if (max_rows == 1) launch_rows<T, 1, kWidth>(a, gated, at);
  else launch_rows<T, kMaxRowsPerLaunch, kWidth>(a, gated, at);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The kernels' arguments for `in` and `options`, but the rows (set per launch).
template <class T>
ProductArgs<T> product_args(const FusedLinearInputs& in, const FusedLinearOptions& options) {
  ProductArgs<T> a{};
  a.weight = in.weight.data<T>();
  a.bias = data_or_null<T>(in.bias);
  a.up_weight = data_or_null<T>(in.up_weight);
  a.up_bias = data_or_null<T>(in.up_bias);
  a.norm_weight = data_or_null<T>(in.norm_weight);
  a.norm_bias = data_or_null<T>(in.norm_bias);
  a.x_stride = in.x.defined() ? in.x.stride(0) : 0;
  a.residual_stride = in.residual.defined() ? in.residual.stride(0) : 0;
  a.in = in.weight.size(1);
  a.outputs = in.weight.size(0);
  a.norm = options.norm;
  a.eps = options.norm_eps;
  a.activate = options.activate;
  a.activation = options.activation;
  return a;
}

// Whether the kernels may read the weights (and the norm's gain) 16 bytes at a time. (The one-row
// kernel reads the norm's gain in 16-byte loads.)
template <class T>
bool loads_vectors(const ProductArgs<T>& a) {
  constexpr int kVector = 16 / sizeof(T);
  return a.in % kVector == 0 && aligned16(a.weight) && (!a.up_weight || aligned16(a.up_weight)) &&
         (!a.norm_weight || aligned16(a.norm_weight));
}

Placement placement(int64_t outputs, bool gated, int device) {
  const int64_t groups = ceil_div(outputs, warps_per_block(gated));
  const int64_t waves = gated ? 8 : 1;  // blocks per SM at most (the grid-stride loop does the rest)
  return {static_cast<unsigned>(std::min<int64_t>(groups, waves * sm_count(device))), device, use_device(device)};
}

}  // namespace

void CudaBackend::fused_linear(const FusedLinearInputs& in, const FusedLinearOptions& options,
                               const Tensor& out) const {
  const char* op = "fused_linear";
  check_on_device(device_, op,
                  {&in.x, &in.weight, &in.bias, &in.up_weight, &in.up_bias, &in.norm_weight, &in.norm_bias,
                   &in.residual, &out});
  const int64_t rows = in.x.size(0), outputs = in.weight.size(0);
  if (rows == 0 || outputs == 0) return;
  const bool gated = in.up_weight.defined();
  const Placement at = placement(outputs, gated, device_);
  dispatch_floating(in.x.dtype(), op, [&]<class T>() {
    ProductArgs<T> a = product_args<T>(in, options);
    const bool vectors = loads_vectors(a);
    for (int64_t first = 0; first < rows; first += kMaxRowsPerLaunch) {
      a.rows = static_cast<int>(std::min(kMaxRowsPerLaunch, rows - first));
      a.x = in.x.data<T>() + first * a.x_stride;
      a.residual = in.residual.defined() ? in.residual.data<T>() + first * a.residual_stride : nullptr;
      a.out = out.data<T>() + first * outputs;
      if (vectors) launch<T, 16 / sizeof(T)>(a, gated, at);
      else launch<T, 1>(a, gated, at);
    }
  });
}

bool takes_attention_splits(const FusedLinearInputs& projection, int64_t heads, int64_t dh, int64_t splits,
                            int device) {
  if (projection.weight.dtype() != kFloat32 || splits > kMaxMergedSplits) return false;
  const ProductArgs<float> a = product_args<float>(projection, FusedLinearOptions{});
  const int64_t warps = warps_per_block(false) * int64_t{sm_count(device)};
  return a.in == heads * dh && loads_vectors(a) && takes_one_row<float, 4>(1, a.in, RowNorm::None, false) &&
         spans_per_row_log2<4>(a.in, a.outputs, RowNorm::None, warps) == 0 && takes_pairs<float, 4>(a.in, a.outputs);
}

void fused_linear_from_splits(const FusedLinearInputs& projection, const AttentionSplits& splits, const Tensor& out,
                              int device) {
  ProductArgs<float> a = product_args<float>(projection, FusedLinearOptions{});
  a.rows = 1;
  a.x = nullptr;  // the row is the splits'
  a.splits = splits;
  a.residual = data_or_null<float>(projection.residual);
  a.out = out.data<float>();
  launch<float, 4>(a, false, placement(a.outputs, false, device));
}

}  // namespace linea::cuda
