#pragma once
// What the attention-forward prototypes (wgmma_attention.cu, wgmma_attention_ws.cu) share: a
// thread's two query rows with their running softmax statistics, the online softmax of one
// score tile into bfloat16 P fragments, the epilogue, and the harness (inputs, the float32
// reference kernel, the largest error against it, event timing). sm_90a, with wgmma.cuh.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "probe.cuh"
#include "wgmma.cuh"

namespace attention_probe {

constexpr int kD = 64;  // head dim

// ---- the softmax and the epilogue, for a 64-row warpgroup (thread index threadIdx.x % 128) -----

// One thread's rows of the block's 64 (16 warp + g and + 8) and their running softmax statistics:
// the max in log2 units of the scaled scores, and this thread's part of the sum.
struct RowState {
  int row[2];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
};

// S (kKeys / 2 registers: register 4i + e is row[e / 2], key kt kKeys + 8i + 2t + e % 2) into
// probabilities packed as the A operand of P V, with the statistics updated; returns in alpha the
// factor O's rows must be scaled by. masked: the last key tile, where keys past a row or past T
// are cut.
template <int kKeys>
__device__ inline void softmax_tile(float (&s)[kKeys / 2], uint32_t (&p)[kKeys / 16][4], float (&alpha)[2],
                                    RowState& st, int kt, bool masked, int T, float scale_log2) {
  const int t = threadIdx.x % 4;
  float tile_max[2] = {-INFINITY, -INFINITY};
  for (int i = 0; i < kKeys / 8; ++i)
    for (int e = 0; e < 4; ++e) {
      const int col = kt * kKeys + 8 * i + 2 * t + e % 2;
      float x = s[4 * i + e] * scale_log2;
      if (masked && (col > st.row[e / 2] || col >= T)) x = -INFINITY;
      s[4 * i + e] = x;
      tile_max[e / 2] = fmaxf(tile_max[e / 2], x);
    }
  for (int h = 0; h < 2; ++h) {
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(~0u, tile_max[h], 1));
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(~0u, tile_max[h], 2));
    const float m_new = fmaxf(st.m[h], tile_max[h]);
    // A row that has seen only masked keys keeps m = -inf: subtract 0 instead (every p is 0).
    const float base = m_new == -INFINITY ? 0.f : m_new;
    alpha[h] = exp2f(st.m[h] - base);
    st.m[h] = m_new;
    st.l[h] *= alpha[h];
    tile_max[h] = base;
  }
  for (int i = 0; i < kKeys / 2; ++i) {
    const float x = exp2f(s[i] - tile_max[(i % 4) / 2]);
    s[i] = x;
    st.l[(i % 4) / 2] += x;
  }
  for (int ks = 0; ks < kKeys / 16; ++ks) {
    p[ks][0] = pack(s[8 * ks + 0], s[8 * ks + 1]);
    p[ks][1] = pack(s[8 * ks + 2], s[8 * ks + 3]);
    p[ks][2] = pack(s[8 * ks + 4], s[8 * ks + 5]);
    p[ks][3] = pack(s[8 * ks + 6], s[8 * ks + 7]);
  }
}

__device__ inline void store_rows(const float (&o)[32], RowState& st, bf16* out, float* lse, size_t head, int T) {
  const int t = threadIdx.x % 4;
  for (int h = 0; h < 2; ++h) {
    st.l[h] += __shfl_xor_sync(~0u, st.l[h], 1);
    st.l[h] += __shfl_xor_sync(~0u, st.l[h], 2);
  }
  for (int i = 0; i < 8; ++i)
    for (int e = 0; e < 4; e += 2) {
      const int r = st.row[e / 2];
      if (r >= T) continue;
      const float inv = 1.f / st.l[e / 2];
      *reinterpret_cast<__nv_bfloat162*>(out + head * kD + (size_t)r * kD + 8 * i + 2 * t) =
          __floats2bfloat162_rn(o[4 * i + e] * inv, o[4 * i + e + 1] * inv);
    }
  if (t == 0)
    for (int h = 0; h < 2; ++h)
      if (st.row[h] < T) lse[head + st.row[h]] = (st.m[h] + log2f(st.l[h])) / 1.4426950408889634f;
}

// The reference: one thread a query row, float32 throughout.
__global__ void reference_forward(const bf16* q, const bf16* k, const bf16* v, float* out, int T, float scale) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= T) return;
  const size_t head = (size_t)blockIdx.y * T * kD;
  float mx = -INFINITY, sum = 0.f, acc[kD] = {};
  for (int j = 0; j <= r; ++j) {
    float x = 0.f;
    for (int d = 0; d < kD; ++d) x += __bfloat162float(q[head + r * kD + d]) * __bfloat162float(k[head + j * kD + d]);
    x *= scale;
    const float m_new = fmaxf(mx, x), a = expf(mx - m_new), p = expf(x - m_new);
    sum = sum * a + p;
    for (int d = 0; d < kD; ++d) acc[d] = acc[d] * a + p * __bfloat162float(v[head + j * kD + d]);
    mx = m_new;
  }
  for (int d = 0; d < kD; ++d) out[head + r * kD + d] = acc[d] / sum;
}

struct Inputs {
  bf16 *q, *k, *v, *out;
  float* lse;
  int heads, T;
};

inline Inputs make_inputs(int heads, int T, std::mt19937& rng) {
  const size_t n = (size_t)heads * T * kD;
  std::normal_distribution<float> normal;
  std::vector<bf16> host(3 * n);
  for (bf16& x : host) x = __float2bfloat16(normal(rng));
  Inputs in{nullptr, nullptr, nullptr, nullptr, nullptr, heads, T};
  CHECK(cudaMalloc(&in.q, sizeof(bf16) * 3 * n));
  in.k = in.q + n;
  in.v = in.k + n;
  CHECK(cudaMemcpy(in.q, host.data(), sizeof(bf16) * 3 * n, cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&in.out, sizeof(bf16) * n));
  CHECK(cudaMalloc(&in.lse, sizeof(float) * heads * T));
  return in;
}

inline void free_inputs(const Inputs& in) {
  CHECK(cudaFree(in.q));
  CHECK(cudaFree(in.out));
  CHECK(cudaFree(in.lse));
}

// Largest error of `launch`'s output against the reference at T (3 heads), relative to
// 1 + |reference|; a NaN anywhere counts as infinite.
inline double largest_error(int T, std::mt19937& rng, const std::function<void(const Inputs&)>& launch) {
  const int heads = 3;
  const Inputs in = make_inputs(heads, T, rng);
  float* ref;
  CHECK(cudaMalloc(&ref, sizeof(float) * heads * T * kD));
  launch(in);
  reference_forward<<<dim3((T + 127) / 128, heads), 128>>>(in.q, in.k, in.v, ref, T, 1.f / std::sqrt(float(kD)));
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<bf16> got((size_t)heads * T * kD);
  std::vector<float> want(got.size());
  CHECK(cudaMemcpy(got.data(), in.out, sizeof(bf16) * got.size(), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(want.data(), ref, sizeof(float) * want.size(), cudaMemcpyDeviceToHost));
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(double(__bfloat162float(got[i])) - want[i]) / (1 + std::fabs(want[i]));
    worst = std::isnan(e) ? INFINITY : std::fmax(worst, e);
  }
  free_inputs(in);
  CHECK(cudaFree(ref));
  return worst;
}

// Mean milliseconds of `launch` over 20 launches after 2 warm-ups (probe.cuh's time_us).
inline double time_ms(const Inputs& in, const std::function<void(const Inputs&)>& launch) {
  return time_us([&] { launch(in); }) / 1000.0;
}

}  // namespace attention_probe
