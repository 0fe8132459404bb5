// Elementwise CUDA kernels: fill, arange, copy (with dtype conversion), unary, binary, where, and
// the rotary embedding (ReGLA's refined gate is in refined_gate.cu).
// One grid-stride kernel serves them all (elementwise.cuh): a functor receives each element's
// index and its offsets in every operand, so any strided or broadcast view works. The op is
// a switch inside the functor, the same branch for every thread: it costs little and keeps nvcc
// from compiling one kernel per op and dtype. The scalar formulas are the CPU's
// (tensor/scalar_math.h), so both backends compute the same function. unary, unary_grad and binary
// take bfloat16 too, computing in float32 (compute_t) and rounding once.
#include <algorithm>
#include <cstdint>

#include "cuda/backend.h"
#include "cuda/cuda_backend.h"
#include "cuda/kernels/elementwise.cuh"
#include "cuda/kernels/pack.cuh"
#include "tensor/dim_runs.h"
#include "cuda/launch.cuh"
#include "tensor/scalar_math.h"

namespace linea::cuda {

namespace {

// out = value(in_0[at], ..., in_{N-1}[at]) at every place: the strided form, for for_each_element.
// value computes in compute_t<T>: bfloat16 elements are widened to float and the result rounded
// once as it is stored.
template <class T, int N, class Value>
struct MapFn {
  using C = compute_t<T>;
  const T* in[N];
  T* out;
  Value value;
  __device__ void operator()(int64_t, const int64_t (&o)[N + 1]) const {
    C x[N];
#pragma unroll
    for (int k = 0; k < N; ++k) x[k] = static_cast<C>(in[k][o[k + 1]]);
    out[o[0]] = static_cast<T>(value(x));
  }
};

// The same over contiguous operands of one shape, 16 bytes of each per thread and step: the
// strided loop's one element at a time keeps too few bytes in flight to fill the memory bus (an
// activation over (16k, 2048) floats ran at about half of it on an H200). The last n % V
// elements go one per thread.
template <class T, int N, class Value>
__global__ void contiguous_map_kernel(int64_t n, MapFn<T, N, Value> f) {
  using C = typename MapFn<T, N, Value>::C;
  constexpr int V = 16 / sizeof(T);
  struct alignas(16) Pack {
    T v[V];
  };
  const int64_t packs = n / V;
  LINEA_GRID_STRIDE_LOOP(p, packs) {
    Pack x[N], y;
#pragma unroll
    for (int k = 0; k < N; ++k) x[k] = reinterpret_cast<const Pack*>(f.in[k])[p];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      C args[N];
#pragma unroll
      for (int k = 0; k < N; ++k) args[k] = static_cast<C>(x[k].v[e]);
      y.v[e] = static_cast<T>(f.value(args));
    }
    reinterpret_cast<Pack*>(f.out)[p] = y;
  }
  const int64_t tail = packs * V + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tail < n) {
    C args[N];
#pragma unroll
    for (int k = 0; k < N; ++k) args[k] = static_cast<C>(f.in[k][tail]);
    f.out[tail] = static_cast<T>(f.value(args));
  }
}

// out = value(in...) elementwise; the inputs have out's shape (stride 0 where broadcast) and T.
// Contiguous and 16-byte aligned operands take the packed kernel, any others the strided loop, in
// memory order (the value does not depend on the element's index).
template <class T, int N, class Value>
void map_elements(const char* op, int device, const Tensor& out, const std::array<const Tensor*, N>& in,
                  const Value& value) {
  MapFn<T, N, Value> f{{}, out.data<T>(), value};
  bool packed = out.is_contiguous() && reinterpret_cast<uintptr_t>(f.out) % 16 == 0;
  std::array<const Shape*, N + 1> strides{&out.strides()};
  for (int k = 0; k < N; ++k) {
    f.in[k] = in[k]->template data<T>();
    strides[k + 1] = &in[k]->strides();
    packed = packed && in[k]->is_contiguous() && reinterpret_cast<uintptr_t>(f.in[k]) % 16 == 0;
  }
  if (!packed) return for_each_element<N + 1>(op, device, out.shape(), strides, f, VisitOrder::Memory);
  const int64_t n = out.numel();
  if (n == 0) return;
  const int64_t threads_needed = std::max<int64_t>(n / (16 / sizeof(T)), n % (16 / sizeof(T)));
  contiguous_map_kernel<T, N, Value><<<blocks_for(threads_needed, device), kThreads, 0, use_device(device)>>>(n, f);
  LINEA_CUDA_LAUNCH_CHECK(op, "shape ", shape_str(out.shape()));
}

template <class T>
struct FillFn {
  T* out;
  T value;
  __device__ void operator()(int64_t, const int64_t (&o)[1]) const { out[o[0]] = value; }
};

// __dadd_rn / __dmul_rn keep nvcc from fusing the two into an fma, which rounds once instead of
// twice: the CPU's values, bit for bit.
template <class T>
struct ArangeFn {
  T* out;
  double start, step;
  __device__ void operator()(int64_t i, const int64_t (&o)[1]) const {
    out[o[0]] = static_cast<T>(__dadd_rn(start, __dmul_rn(step, static_cast<double>(i))));
  }
};

template <class In, class Out>
struct CastFn {
  const In* in;
  Out* out;
  __device__ void operator()(int64_t, const int64_t (&o)[2]) const { out[o[0]] = static_cast<Out>(in[o[1]]); }
};

// float32 <-> bfloat16 between contiguous tensors (a bf16 step casts every weight this way): 4
// elements a thread and step, one 16-byte float32 and one 8-byte bfloat16 access, where CastFn's
// strided loop moved one element at a time. The same conversion, so the same bits.
template <class In, class Out>
__global__ void contiguous_cast_kernel(int64_t n, const In* in, Out* out) {
  constexpr int V = 4;
  const int64_t packs = n / V;
  LINEA_GRID_STRIDE_LOOP(p, packs) {
    const Pack<In, V> x = load_pack<In, V>(in + V * p);
    Pack<Out, V> y;
#pragma unroll
    for (int e = 0; e < V; ++e) y.v[e] = static_cast<Out>(x.v[e]);
    store_pack<Out, V>(out + V * p, y);
  }
  const int64_t tail = packs * V + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tail < n) out[tail] = static_cast<Out>(in[tail]);
}

// Casts src into dst with contiguous_cast_kernel where it applies (float32 <-> bfloat16, both
// contiguous, each aligned to its 4-element pack); false where it does not.
bool cast_contiguous(const Tensor& src, const Tensor& dst, int device) {
  const bool pair = (src.dtype() == kFloat32 && dst.dtype() == kBFloat16) ||
                    (src.dtype() == kBFloat16 && dst.dtype() == kFloat32);
  if (!pair || !src.is_contiguous() || !dst.is_contiguous() || dst.numel() == 0) return false;
  const auto aligned = [](const Tensor& t) {
    return reinterpret_cast<uintptr_t>(t.raw_data()) % (4 * dtype_size(t.dtype())) == 0;
  };
  if (!aligned(src) || !aligned(dst)) return false;
  const int64_t n = dst.numel();
  const int64_t threads_needed = std::max<int64_t>(n / 4, n % 4);
  const cudaStream_t stream = use_device(device);
  if (src.dtype() == kFloat32)
    contiguous_cast_kernel<<<blocks_for(threads_needed, device), kThreads, 0, stream>>>(n, src.data<float>(),
                                                                                          dst.data<bfloat16>());
  else
    contiguous_cast_kernel<<<blocks_for(threads_needed, device), kThreads, 0, stream>>>(n, src.data<bfloat16>(),
                                                                                          dst.data<float>());
  LINEA_CUDA_LAUNCH_CHECK("copy", dst.describe(), " from ", src.describe());
  return true;
}

template <class T>
__device__ T unary_value(UnaryOp op, T x, T a, T b) {
  using namespace scalar;
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return exp(x);
    case UnaryOp::Log: return log(x);
    case UnaryOp::Sqrt: return sqrt(x);
    case UnaryOp::Rsqrt: return T(1) / sqrt(x);  // not rsqrt(): the CPU's rounding
    case UnaryOp::Abs: return fabs(x);
    case UnaryOp::Sin: return sin(x);
    case UnaryOp::Cos: return cos(x);
    case UnaryOp::Tanh: return tanh(x);
    case UnaryOp::Sigmoid: return sigmoid(x);
    case UnaryOp::LogSigmoid: return log_sigmoid(x);
    case UnaryOp::Softplus: return softplus(x);
    case UnaryOp::Relu: return x > T(0) ? x : T(0);
    case UnaryOp::Elu: return elu(x, a);
    case UnaryOp::GeluTanh: return gelu_tanh(x);
    case UnaryOp::GeluErf: return gelu_erf(x);
    case UnaryOp::Silu: return silu(x);
    case UnaryOp::Pow: return pow(x, a);
    case UnaryOp::Clamp: return x < a ? a : (x > b ? b : x);
    case UnaryOp::Sign: return sign(x);
    case UnaryOp::Reciprocal: return T(1) / x;
    case UnaryOp::Square: return x * x;
    case UnaryOp::Log1p: return log1p(x);
    case UnaryOp::Expm1: return expm1(x);
    case UnaryOp::Erf: return erf(x);
    case UnaryOp::Step: return x > T(0) ? T(1) : T(0);
    case UnaryOp::GeluTanhGrad: return gelu_tanh_grad(x);
    case UnaryOp::GeluErfGrad: return gelu_erf_grad(x);
    case UnaryOp::EluGrad: return elu_grad(x, a);
  }
  return x;
}

// The value of one element from the elements of the inputs at its place (map_elements).
template <class T>
struct UnaryValue {
  UnaryOp op;
  T a, b;
  __device__ T operator()(const T (&x)[1]) const { return unary_value(op, x[0], a, b); }
};

// dy * derivative(x) from (x, dy), derivative one of the helpers unary_value knows.
template <class T>
struct UnaryGradValue {
  UnaryOp derivative;
  T a;
  __device__ T operator()(const T (&x)[2]) const { return x[1] * unary_value(derivative, x[0], a, T(0)); }
};

template <class T>
__device__ T arithmetic_value(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::Add: return x + y;
    case BinaryOp::Sub: return x - y;
    case BinaryOp::Mul: return x * y;
    case BinaryOp::Div: return x / y;
    case BinaryOp::Pow: return pow(x, y);
    case BinaryOp::Maximum: return scalar::max_nan(x, y);
    case BinaryOp::Minimum: return scalar::min_nan(x, y);
    default: return x;  // comparisons and logic have their own functors
  }
}

template <class T>
__device__ bool compare_value(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::Eq: return x == y;
    case BinaryOp::Ne: return x != y;
    case BinaryOp::Lt: return x < y;
    case BinaryOp::Le: return x <= y;
    case BinaryOp::Gt: return x > y;
    case BinaryOp::Ge: return x >= y;
    case BinaryOp::And: return x && y;
    case BinaryOp::Or: return x || y;
    default: return false;
  }
}

template <class T>
struct ArithmeticValue {
  BinaryOp op;
  __device__ T operator()(const T (&x)[2]) const { return arithmetic_value(op, x[0], x[1]); }
};

template <class T>
struct CompareFn {
  const T* a;
  const T* b;
  bool* out;
  BinaryOp op;
  __device__ void operator()(int64_t, const int64_t (&o)[3]) const { out[o[0]] = compare_value(op, a[o[1]], b[o[2]]); }
};

template <class T>
struct WhereFn {
  const bool* cond;
  const T* a;
  const T* b;
  T* out;
  __device__ void operator()(int64_t, const int64_t (&o)[4]) const { out[o[0]] = cond[o[1]] ? a[o[2]] : b[o[3]]; }
};

// RoPE: each warp takes kRotaryRowsPerWarp rows of x (..., T, dh), its lanes over the pairs
// (i, i + half) and then over the dims past 2 half, which are copied. Rows are found through
// their leading-dim strides, in 32-bit arithmetic (the host checks that rows < 2^30). For heads
// of up to 64 dims, all rotated (the usual case), every row's loads are issued before any store,
// so that a warp has several rows in flight instead of one small load at a time. bfloat16 rows
// rotate in float32 (C = compute_t<T>, the tables' type) and round once.
constexpr int kRotaryRowsPerWarp = 4;

// Rows whose halves split into groups of 4 pairs, each group's 4 + 4 elements and 4 + 4 angles
// loaded with one load apiece (16 bytes of float32, 8 of bfloat16): one thread per (row, group),
// so a warp has 32 groups' loads in flight. On an H100 at the training step's q and k ((16, 8,
// 1024, 64) bfloat16, every dim rotated) the warp-per-row kernel below took 42 us, this one 18 us.
template <class T, class C = compute_t<T>>
__global__ void rotary_packed_kernel(const T* x, T* y, const C* cos, const C* sin, int64_t cos_row, int32_t rows,
                                     int32_t length, int half, StridedOffsets<2> row_at, C sign) {
  const int32_t groups = half / 4;
  const int64_t total = static_cast<int64_t>(rows) * groups;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const auto row = static_cast<int32_t>(i / groups);
    const int c = 4 * static_cast<int>(i - static_cast<int64_t>(row) * groups);
    int64_t at[2];
    row_at.at(row, at);
    const int64_t table = (row % length) * cos_row + c;
    using cuda::load_pack;
    const cuda::Pack<T, 4> a = load_pack<T, 4>(x + at[0] + c), b = load_pack<T, 4>(x + at[0] + half + c);
    const cuda::Pack<C, 4> ct = load_pack<C, 4>(cos + table), st = load_pack<C, 4>(sin + table);
    cuda::Pack<T, 4> u, w;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      C first, second;
      scalar::rotate_pair(static_cast<C>(a.v[e]), static_cast<C>(b.v[e]), ct.v[e], sign * st.v[e], first, second);
      u.v[e] = static_cast<T>(first);
      w.v[e] = static_cast<T>(second);
    }
    cuda::store_pack<T, 4>(y + at[1] + c, u);
    cuda::store_pack<T, 4>(y + at[1] + half + c, w);
  }
}

template <class T, class C = compute_t<T>>
__global__ void rotary_kernel(const T* x, T* y, const C* cos, const C* sin, int64_t cos_row, int32_t rows,
                              int32_t length, int half, int dh, StridedOffsets<2> row_at, C sign) {
  const int lane = threadIdx.x % 32;
  const auto first =
      static_cast<int32_t>((static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32 * kRotaryRowsPerWarp);
  if (half <= 32 && dh == 2 * half) {
    C a[kRotaryRowsPerWarp], b[kRotaryRowsPerWarp], c[kRotaryRowsPerWarp], s[kRotaryRowsPerWarp];
    int64_t out[kRotaryRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRotaryRowsPerWarp; ++r) {
      const int32_t row = first + r;
      if (row < rows && lane < half) {
        int64_t at[2];
        row_at.at(row, at);
        const int64_t table = (row % length) * cos_row + lane;
        a[r] = static_cast<C>(x[at[0] + lane]);
        b[r] = static_cast<C>(x[at[0] + lane + half]);
        c[r] = cos[table];
        s[r] = sign * sin[table];
        out[r] = at[1] + lane;
      }
    }
#pragma unroll
    for (int r = 0; r < kRotaryRowsPerWarp; ++r)
      if (first + r < rows && lane < half) {
        C u, w;
        scalar::rotate_pair(a[r], b[r], c[r], s[r], u, w);
        y[out[r]] = static_cast<T>(u);
        y[out[r] + half] = static_cast<T>(w);
      }
    return;
  }
  for (int32_t row = first; row < first + kRotaryRowsPerWarp && row < rows; ++row) {
    int64_t at[2];
    row_at.at(row, at);
    const T* xr = x + at[0];
    T* yr = y + at[1];
    const int64_t t = row % length;
    const C* ct = cos + t * cos_row;
    const C* st = sin + t * cos_row;
    for (int i = lane; i < half; i += 32) {
      C u, w;
      scalar::rotate_pair(static_cast<C>(xr[i]), static_cast<C>(xr[i + half]), ct[i], sign * st[i], u, w);
      yr[i] = static_cast<T>(u);
      yr[i + half] = static_cast<T>(w);
    }
    for (int j = 2 * half + lane; j < dh; j += 32) yr[j] = xr[j];
  }
}

}  // namespace

void CudaBackend::fill(const Tensor& out, double value) const {
  dispatch_all(out.dtype(), [&]<class T>() {
    for_each_element<1>("fill", device_, out.shape(), {&out.strides()}, FillFn<T>{out.data<T>(), static_cast<T>(value)});
  });
}

void CudaBackend::arange(const Tensor& out, double start, double step) const {
  dispatch_all(out.dtype(), [&]<class T>() {
    for_each_element<1>("arange", device_, out.shape(), {&out.strides()}, ArangeFn<T>{out.data<T>(), start, step});
  });
}

namespace {

// A copy between two layouts that are, once dims are merged, rows of contiguous elements (each
// with a row stride of its own), as when a linear attention layer's projections, views of one
// product (nn/layers/stacked_projection.h), have their gradients copied back into one buffer.
// The strided loop below moves one element per thread at a time, too few bytes in flight to fill
// the memory bus (16k rows of 512 floats into rows 2560 apart: 37 us on an H200), and
// cudaMemcpy2DAsync was no better (41 us); rows_copy_kernel moves units of up to 16 bytes, kUnroll
// per thread in flight, and runs that copy near the bandwidth of a contiguous one.
constexpr int kRowsCopyUnroll = 4;

template <class Unit>
__global__ void rows_copy_kernel(char* dst, const char* src, int64_t dst_pitch, int64_t src_pitch,
                                 int64_t units_per_row, int64_t total_units) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; first < total_units;
       first += step * kRowsCopyUnroll) {
    Unit unit[kRowsCopyUnroll];
    int64_t to[kRowsCopyUnroll];
#pragma unroll
    for (int u = 0; u < kRowsCopyUnroll; ++u) {
      const int64_t i = first + u * step;
      if (i >= total_units) break;
      const int64_t row = i / units_per_row, col = (i - row * units_per_row) * static_cast<int64_t>(sizeof(Unit));
      unit[u] = *reinterpret_cast<const Unit*>(src + row * src_pitch + col);
      to[u] = row * dst_pitch + col;
    }
#pragma unroll
    for (int u = 0; u < kRowsCopyUnroll; ++u)
      if (first + u * step < total_units) *reinterpret_cast<Unit*>(dst + to[u]) = unit[u];
  }
}

template <class Unit>
void launch_rows_copy(char* dst, const char* src, int64_t dst_pitch, int64_t src_pitch, int64_t width, int64_t rows,
                      int device, cudaStream_t stream) {
  const int64_t units_per_row = width / static_cast<int64_t>(sizeof(Unit)), total = units_per_row * rows;
  const int64_t blocks = std::min<int64_t>(ceil_div(total, int64_t{kThreads} * kRowsCopyUnroll),
                                           int64_t{blocks_for(total, device)});
  rows_copy_kernel<Unit><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(dst, src, dst_pitch, src_pitch,
                                                                                 units_per_row, total);
}

bool copy_rows(const Tensor& src, const Tensor& dst, int device, cudaStream_t stream) {
  if (src.dtype() != dst.dtype()) return false;
  const Runs<2> runs = merge_dims<2>(dst.shape(), {&dst.strides(), &src.strides()});
  if (runs.sizes.size() != 2 || runs.strides[0][1] != 1 || runs.strides[1][1] != 1) return false;
  const int64_t elem = static_cast<int64_t>(dtype_size(dst.dtype())), width = runs.sizes[1] * elem;
  const int64_t dst_pitch = runs.strides[0][0] * elem, src_pitch = runs.strides[1][0] * elem;
  if (dst_pitch < width || src_pitch < width) return false;  // overlapping or reversed rows
  char* to = static_cast<char*>(dst.raw_data());
  const char* from = static_cast<const char*>(src.raw_data());
  // The widest unit that every row's start and width allow.
  const auto fits = [&](int64_t bytes) {
    return (reinterpret_cast<uintptr_t>(to) | reinterpret_cast<uintptr_t>(from) | static_cast<uintptr_t>(dst_pitch) |
            static_cast<uintptr_t>(src_pitch) | static_cast<uintptr_t>(width)) % bytes == 0;
  };
  const int64_t rows = runs.sizes[0];
  if (fits(16)) launch_rows_copy<uint4>(to, from, dst_pitch, src_pitch, width, rows, device, stream);
  else if (fits(8)) launch_rows_copy<uint2>(to, from, dst_pitch, src_pitch, width, rows, device, stream);
  else if (fits(4)) launch_rows_copy<uint32_t>(to, from, dst_pitch, src_pitch, width, rows, device, stream);
  else launch_rows_copy<uint8_t>(to, from, dst_pitch, src_pitch, width, rows, device, stream);
  LINEA_CUDA_LAUNCH_CHECK("copy", dst.describe(), " from ", src.describe());
  return true;
}

}  // namespace

void CudaBackend::copy(const Tensor& src, const Tensor& dst) const {
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    const size_t bytes = dst.numel() * dtype_size(dst.dtype());
    if (bytes == 0) return;
    const cudaStream_t stream = use_device(device_);
    LINEA_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), bytes, cudaMemcpyDeviceToDevice, stream),
                     "copy", dst.describe());
    return;
  }
  if (dst.numel() > 0 && copy_rows(src, dst, device_, use_device(device_))) return;
  if (cast_contiguous(src, dst, device_)) return;
  dispatch_all(src.dtype(), [&]<class In>() {
    dispatch_all(dst.dtype(), [&]<class Out>() {
      for_each_element<2>("copy", device_, dst.shape(), {&dst.strides(), &src.strides()},
                          CastFn<In, Out>{src.data<In>(), dst.data<Out>()});
    });
  });
}

void CudaBackend::unary(UnaryOp op, const Tensor& in, const Tensor& out, UnaryArgs args) const {
  dispatch_floating_or_bf16(in.dtype(), "unary", [&]<class T>() {
    using C = compute_t<T>;
    map_elements<T, 1>("unary", device_, out, {&in}, UnaryValue<C>{op, static_cast<C>(args.a), static_cast<C>(args.b)});
  });
}

void CudaBackend::unary_grad(UnaryOp derivative, const Tensor& x, const Tensor& dy, const Tensor& out,
                             UnaryArgs args) const {
  const bool helper = derivative == UnaryOp::Step || derivative == UnaryOp::GeluTanhGrad ||
                      derivative == UnaryOp::GeluErfGrad || derivative == UnaryOp::EluGrad;
  if (!helper) fail("unary_grad", "op ", static_cast<int>(derivative), " is not a derivative helper");
  dispatch_floating_or_bf16(x.dtype(), "unary_grad", [&]<class T>() {
    using C = compute_t<T>;
    map_elements<T, 2>("unary_grad", device_, out, {&x, &dy}, UnaryGradValue<C>{derivative, static_cast<C>(args.a)});
  });
}

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) const {
  const std::array<const Shape*, 3> strides{&out.strides(), &a.strides(), &b.strides()};
  if (op == BinaryOp::And || op == BinaryOp::Or) {
    for_each_element<3>("binary", device_, out.shape(), strides,
                        CompareFn<bool>{a.data<bool>(), b.data<bool>(), out.data<bool>(), op});
  } else if (is_comparison(op)) {
    dispatch_all(a.dtype(), [&]<class T>() {
      for_each_element<3>("binary", device_, out.shape(), strides,
                          CompareFn<T>{a.data<T>(), b.data<T>(), out.data<bool>(), op});
    });
  } else {
    dispatch_floating_or_bf16(a.dtype(), "binary", [&]<class T>() {
      map_elements<T, 2>("binary", device_, out, {&a, &b}, ArithmeticValue<compute_t<T>>{op});
    });
  }
}

void CudaBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) const {
  dispatch_all(out.dtype(), [&]<class T>() {
    for_each_element<4>("where", device_, out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()},
                        WhereFn<T>{cond.data<bool>(), a.data<T>(), b.data<T>(), out.data<T>()});
  });
}

namespace {

// Whether rotary_packed_kernel applies: every dim rotated, halves of whole groups of 4, and every
// row of x and y and of the tables starting on a group's bytes.
template <class T>
bool rotary_packs_fit(const Tensor& x, const Tensor& y, const Tensor& cos, const Tensor& sin) {
  const int64_t half = cos.size(1), dh = x.size(-1);
  if (dh != 2 * half || half % 4 != 0 || cos.stride(0) % 4 != 0 || sin.stride(0) != cos.stride(0)) return false;
  for (const Tensor* t : {&x, &y})
    for (int64_t d = 0; d + 1 < t->dim(); ++d)
      if (t->size(d) > 1 && t->stride(d) % 4 != 0) return false;
  const auto aligned = [](const Tensor& t, size_t bytes) {
    return reinterpret_cast<uintptr_t>(t.raw_data()) % bytes == 0;
  };
  return aligned(x, 4 * sizeof(T)) && aligned(y, 4 * sizeof(T)) && aligned(cos, 16) && aligned(sin, 16);
}

}  // namespace

void CudaBackend::rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& y) const {
  const int64_t dh = x.size(-1), rows = x.numel() / dh;
  if (rows == 0) return;
  const Shape row_shape(x.shape().begin(), x.shape().end() - 1);
  const Shape x_rows(x.strides().begin(), x.strides().end() - 1), y_rows(y.strides().begin(), y.strides().end() - 1);
  const StridedOffsets<2> row_at = strided_offsets<2>(row_shape, {&x_rows, &y_rows});
  const cudaStream_t stream = use_device(device_);
  constexpr int kRowsPerBlock = kThreads / 32 * kRotaryRowsPerWarp;
  LINEA_CHECK(rows < (int64_t{1} << 30) && dh < (int64_t{1} << 30), "rotary", "at most 2^30 rows of x, got ",
              x.describe());
  const auto blocks = static_cast<unsigned>(ceil_div(rows, kRowsPerBlock));
  dispatch_floating_or_bf16(y.dtype(), "rotary", [&]<class T>() {
    using C = compute_t<T>;
    if (rotary_packs_fit<T>(x, y, cos, sin)) {
      const int64_t groups = rows * (cos.size(1) / 4);
      rotary_packed_kernel<T><<<cuda::blocks_for(groups, device_), kThreads, 0, stream>>>(
          x.data<T>(), y.data<T>(), cos.data<C>(), sin.data<C>(), cos.stride(0), static_cast<int32_t>(rows),
          static_cast<int32_t>(x.size(-2)), static_cast<int>(cos.size(1)), row_at, inverse ? C(-1) : C(1));
      LINEA_CUDA_LAUNCH_CHECK("rotary", x.describe());
      return;
    }
    rotary_kernel<T><<<blocks, kThreads, 0, stream>>>(x.data<T>(), y.data<T>(), cos.data<C>(), sin.data<C>(),
                                                      cos.stride(0), static_cast<int32_t>(rows),
                                                      static_cast<int32_t>(x.size(-2)), static_cast<int>(cos.size(1)),
                                                      static_cast<int>(dh), row_at, inverse ? C(-1) : C(1));
    LINEA_CUDA_LAUNCH_CHECK("rotary", x.describe());
  });
}

Tensor contiguous_copy(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = empty(t.shape(), t.dtype(), t.device());
  cuda_backend(t.device().index).copy(t, out);
  return out;
}

}  // namespace linea::cuda
