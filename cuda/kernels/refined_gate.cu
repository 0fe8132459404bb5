// ReGLA's refined gate and its backward (tensor/backend.h: refined_log_gate), floored:
//   out = max(log f(a + bias_a, c + bias_c), floor),  f = g (g + 2 r (1 - g)), g = sigmoid, r = sigmoid,
// with the formulas of tensor/scalar_math.h, so that both backends compute the same function.
//
// The kernels are bound by their arithmetic, not by memory: ncu on an H200 (B=16, T=1024, 8 heads
// of 64) found the strided loop issuing on 79% (forward) and 77% (backward) of its cycles with the
// DRAM 17-21% busy, at 256 and 347 instructions per element: three exp and three log1p per element
// and, around them, every operand's offset found again for every element. In the layers the
// operands are laid out alike (the (B, T, H, dv) projections seen as (B, H, T, dv), the biases one
// (H, dv) row), so the common case runs as rows of channels: each thread takes V neighbouring
// channels of one row, 16 bytes of every operand in one load, and finds its place with one 32-bit
// division. Any other layout takes the strided loop.
#include <array>
#include <cstdint>

#include "cuda/backend.h"
#include "cuda/cuda_backend.h"
#include "cuda/kernels/elementwise.cuh"
#include "cuda/kernels/pack.cuh"
#include "cuda/launch.cuh"
#include "tensor/scalar_math.h"

namespace linea::cuda {

namespace {

// ---- any layout: one element per thread, offsets through StridedOffsets

template <class T>
struct RefinedGateFn {
  const T *a, *c, *bias_a, *bias_c;
  T* out;
  T floor;
  __device__ void operator()(int64_t, const int64_t (&o)[5]) const {
    const T v = scalar::refined_log_gate(a[o[1]] + bias_a[o[3]], c[o[2]] + bias_c[o[4]]).value;
    out[o[0]] = v < floor ? floor : v;
  }
};

// The backward, recomputed from a and c: the derivatives times dout, 0 on the floor (clamp's rule).
template <class T>
struct RefinedGateGradFn {
  const T *a, *c, *bias_a, *bias_c, *dout;
  T *da, *dc;
  T floor;
  __device__ void operator()(int64_t, const int64_t (&o)[7]) const {
    const auto f = scalar::refined_log_gate(a[o[0]] + bias_a[o[2]], c[o[1]] + bias_c[o[3]]);
    const T g = f.value > floor ? dout[o[4]] : T(0);
    da[o[5]] = g * f.d_a;
    dc[o[6]] = g * f.d_c;
  }
};

// ---- operands laid out alike: rows of channels

// N operands, each `rows` rows of `width` contiguous channels with a row stride of its own (0 for
// the biases, one row for all), V channels per thread. Built by rows_of, which says whether the
// operands allow it.
template <int N>
struct Rows {
  int32_t rows, width;
  int64_t stride[N];
};

// Calls f(row, channel) for the first channel of every thread's V, in a grid-stride loop.
// The packs number fewer than 2^31 (rows_of), so the division is a 32-bit one.
template <class F>
__device__ __forceinline__ void for_each_pack(int32_t rows, int32_t width, int V, const F& f) {
  const auto packs_per_row = static_cast<uint32_t>(width / V);
  const int64_t n = int64_t{rows} * packs_per_row;
  LINEA_GRID_STRIDE_LOOP(i, n) {
    const auto j = static_cast<uint32_t>(i), row = j / packs_per_row;
    f(static_cast<int64_t>(row), static_cast<int>(j - row * packs_per_row) * V);
  }
}

// Operands: out, a, c, bias_a, bias_c.
template <class T, int V>
__global__ void refined_gate_rows_kernel(Rows<5> r, T* out, const T* a, const T* c, const T* bias_a, const T* bias_c,
                                         T floor) {
  for_each_pack(r.rows, r.width, V, [&](int64_t row, int ch) {
    const Pack<T, V> x = load_pack<T, V>(a + row * r.stride[1] + ch), y = load_pack<T, V>(c + row * r.stride[2] + ch);
    const Pack<T, V> bx = load_pack<T, V>(bias_a + ch), by = load_pack<T, V>(bias_c + ch);
    Pack<T, V> result;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const T v = scalar::refined_log_gate(x.v[e] + bx.v[e], y.v[e] + by.v[e]).value;
      result.v[e] = v < floor ? floor : v;
    }
    store_pack<T, V>(out + row * r.stride[0] + ch, result);
  });
}

// Operands: a, c, bias_a, bias_c, dout, da, dc.
template <class T, int V>
__global__ void refined_gate_rows_backward_kernel(Rows<7> r, const T* a, const T* c, const T* bias_a,
                                                  const T* bias_c, const T* dout, T* da, T* dc, T floor) {
  for_each_pack(r.rows, r.width, V, [&](int64_t row, int ch) {
    const Pack<T, V> x = load_pack<T, V>(a + row * r.stride[0] + ch), y = load_pack<T, V>(c + row * r.stride[1] + ch);
    const Pack<T, V> bx = load_pack<T, V>(bias_a + ch), by = load_pack<T, V>(bias_c + ch);
    const Pack<T, V> g = load_pack<T, V>(dout + row * r.stride[4] + ch);
    Pack<T, V> gx, gy;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const auto f = scalar::refined_log_gate(x.v[e] + bx.v[e], y.v[e] + by.v[e]);
      const T through = f.value > floor ? g.v[e] : T(0);
      gx.v[e] = through * f.d_a;
      gy.v[e] = through * f.d_c;
    }
    store_pack<T, V>(da + row * r.stride[5] + ch, gx);
    store_pack<T, V>(dc + row * r.stride[6] + ch, gy);
  });
}

// Whether the operands (tensors of one shape, broadcasts included) are rows of channels for the
// kernels above, with V channels per thread: seen in operand 0's memory order they merge into
// (rows, channels) with unit channel strides, the operands in `broadcast` have row stride 0, every
// row starts on 16 bytes, and the packs fit 32-bit indices. Fills `rows` when they are.
template <class T, int N>
bool rows_of(const Shape& shape, const std::array<const Tensor*, N>& operands, const std::array<bool, N>& broadcast,
             int V, Rows<N>& rows) {
  std::array<const Shape*, N> strides;
  for (int k = 0; k < N; ++k) strides[k] = &operands[k]->strides();
  const StridedOffsets<N> s = strided_offsets<N>(shape, strides, VisitOrder::Memory);
  const int inner = s.ndim - 1;
  const int64_t width = s.sizes[inner], count = s.ndim == 1 ? 1 : s.sizes[0];
  if (s.ndim > 2 || width % V != 0 || count * width / V > INT32_MAX) return false;
  rows.rows = static_cast<int32_t>(count);
  rows.width = static_cast<int32_t>(width);
  for (int k = 0; k < N; ++k) {
    rows.stride[k] = s.ndim == 1 ? 0 : s.strides[0][k];
    const bool aligned = reinterpret_cast<uintptr_t>(operands[k]->template data<T>()) % (sizeof(T) * V) == 0;
    if (s.strides[inner][k] != 1 || !aligned || rows.stride[k] % V != 0) return false;
    if (broadcast[k] && rows.stride[k] != 0) return false;
  }
  return true;
}

template <int N>
unsigned pack_blocks(const Rows<N>& r, int device, int V) {
  return blocks_for(int64_t{r.rows} * r.width / V, device);
}

}  // namespace

void CudaBackend::refined_log_gate(const Tensor& a, const Tensor& c, const Tensor& bias_a, const Tensor& bias_c,
                                   double floor, const Tensor& out) const {
  const char* op = "refined_log_gate";
  dispatch_floating(a.dtype(), op, [&]<class T>() {
    if (out.numel() == 0) return;
    constexpr int V = kPack<T>;
    Rows<5> r{};
    if (rows_of<T, 5>(out.shape(), {&out, &a, &c, &bias_a, &bias_c}, {false, false, false, true, true}, V, r)) {
      refined_gate_rows_kernel<T, V><<<pack_blocks(r, device_, V), kThreads, 0, use_device(device_)>>>(
          r, out.data<T>(), a.data<T>(), c.data<T>(), bias_a.data<T>(), bias_c.data<T>(), static_cast<T>(floor));
      LINEA_CUDA_LAUNCH_CHECK(op, "shape ", shape_str(out.shape()));
      return;
    }
    for_each_element<5>(op, device_, out.shape(),
                        {&out.strides(), &a.strides(), &c.strides(), &bias_a.strides(), &bias_c.strides()},
                        RefinedGateFn<T>{a.data<T>(), c.data<T>(), bias_a.data<T>(), bias_c.data<T>(), out.data<T>(),
                                         static_cast<T>(floor)},
                        VisitOrder::Memory);
  });
}

void CudaBackend::refined_log_gate_backward(const Tensor& a, const Tensor& c, const Tensor& bias_a,
                                            const Tensor& bias_c, double floor, const Tensor& dout, const Tensor& da,
                                            const Tensor& dc) const {
  const char* op = "refined_log_gate_backward";
  dispatch_floating(a.dtype(), op, [&]<class T>() {
    if (a.numel() == 0) return;
    constexpr int V = kPack<T>;
    Rows<7> r{};
    if (rows_of<T, 7>(a.shape(), {&a, &c, &bias_a, &bias_c, &dout, &da, &dc},
                      {false, false, true, true, false, false, false}, V, r)) {
      refined_gate_rows_backward_kernel<T, V><<<pack_blocks(r, device_, V), kThreads, 0, use_device(device_)>>>(
          r, a.data<T>(), c.data<T>(), bias_a.data<T>(), bias_c.data<T>(), dout.data<T>(), da.data<T>(), dc.data<T>(),
          static_cast<T>(floor));
      LINEA_CUDA_LAUNCH_CHECK(op, "shape ", shape_str(a.shape()));
      return;
    }
    for_each_element<7>(op, device_, a.shape(),
                        {&a.strides(), &c.strides(), &bias_a.strides(), &bias_c.strides(), &dout.strides(),
                         &da.strides(), &dc.strides()},
                        RefinedGateGradFn<T>{a.data<T>(), c.data<T>(), bias_a.data<T>(), bias_c.data<T>(),
                                             dout.data<T>(), da.data<T>(), dc.data<T>(), static_cast<T>(floor)},
                        VisitOrder::Memory);
  });
}

}  // namespace linea::cuda
