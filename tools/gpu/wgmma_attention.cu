// How fast a causal attention forward in bfloat16 gets with Hopper's warpgroup products (wgmma),
// written plainly: the measurement behind the plan for linea's sm_90 attention kernels
// (docs/benchmarks.md, twenty-sixth session). Not part of the build; on an sm_90 GPU, from the
// repository root:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/wgmma_attention tools/gpu/wgmma_attention.cu && /tmp/wgmma_attention
// then `build-gpu/tools/linea bench attention --device cuda --dtype bfloat16` in the same run for
// linea's own (mma.sync) forward.
//
// The kernels: one warpgroup (128 threads) per 64 query rows of one (batch, head), head dim 64. Key
// and value tiles stream through shared memory (cp.async, the next tile loading while this one is
// used), stored with the 128-byte swizzle that wgmma_probe.cu checked. Per key tile: S = Q K^T
// (both operands from shared memory), the online softmax on the accumulator in registers
// (float32, exp2 with the scale folded in), P packed to bfloat16 registers as the A operand,
// O += P V (V N-major). Four variants:
//   64-key tiles              S as m64n64k16 products; S, wait, softmax, P V, wait (four blocks a
//                             multiprocessor overlap each other);
//   128-key tiles             the same with m64n128k16: twice the work between barriers;
//   ... overlapped            FlashAttention-3's order inside the warpgroup: S(kt + 1) and P V(kt)
//                             issued, then the softmax of S(kt + 1) while P V(kt) runs.
// Each is checked against a float32 reference kernel (one thread a query row) at T = 320, 200 and
// 77 (partial last tiles) before the timings at T = 1k, 4k and 16k, B = H = 8.
//
// On an H200 (nvcc 13, 2026-11-29), forward ms. Left: one run with linea's forward (two rounds);
// right: a later run of the final file (the overlapped variants in FlashAttention-3's order).
//   T      linea (mma.sync)   64-key          128-key       |  64-key   128-key   64 overl.   128 overl.
//   1k     0.070 - 0.072      0.056 - 0.057   0.053         |  0.056    0.052     0.063       0.073
//   4k     0.577 - 0.583      0.587 - 0.591   0.545 - 0.546 |  0.586    0.532     0.670       0.747
//   16k    8.05 - 8.11        8.30 - 8.31     7.63 - 7.64   |  8.32     7.51      9.47        10.61
// Parity: largest error 0.002 - 0.003 (relative to 1 + |reference|) in every variant. So wgmma as
// such buys 5 - 7% at 4k and 16k: at head dim 64 each 64 x 128 tile costs about as many cycles of
// exp2 (MUFU, 16 a cycle a multiprocessor) and of float32 softmax arithmetic as of products, so
// the forward is bound by the softmax, with mma.sync or wgmma alike (about 290 TFLOP/s). The gain
// has to come from running the softmax while the tensor cores work; but ptxas serialises the
// overlapped variants' products (its notes C7513 / C7514: the softmax reads an accumulator, or
// writes an operand, while a product group is still open), and they are slower. Getting that
// overlap is the next step (warp-specialised producer and two consumer warpgroups in turn, as
// FlashAttention-3 does), not a plain port to wgmma.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "attention_forward_common.cuh"

namespace {

using namespace attention_probe;

constexpr int kRows = 64, kThreads = 128;

// ---- the kernels ----------------------------------------------------------------------------

// q, k, v, out: (B H, T, 64) bfloat16; lse: (B H, T) float32 (natural log). Causal. kKeys: the key
// tile, 64 or 128 (S then is one m64n128 product a k-step: twice the work between barriers).
// Each tile: S, wait, softmax, P V, wait.
template <int kKeys>
__global__ void __launch_bounds__(kThreads) attention_forward(const bf16* q, const bf16* k, const bf16* v, bf16* out,
                                                              float* lse, int T, float scale) {
  unsigned char* const sQ = aligned_smem();
  auto sK = [&](int buf) { return sQ + (kRows + buf * kKeys) * 128; };
  auto sV = [&](int buf) { return sQ + (kRows + (2 + buf) * kKeys) * 128; };
  const int qt = (T + kRows - 1) / kRows - 1 - blockIdx.x;  // the longest rows first
  const int last_kt = (qt * kRows + kRows - 1) / kKeys;     // the key tile of the block's last row
  const size_t head = (size_t)blockIdx.y * T;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
  const float scale_log2 = scale * 1.4426950408889634f;

  load_tile<kRows>(sQ, q + head * kD, qt * kRows, T);
  load_tile<kKeys>(sK(0), k + head * kD, 0, T);
  load_tile<kKeys>(sV(0), v + head * kD, 0, T);
  cp_async_commit();

  float o[32] = {}, s[kKeys / 2] = {};
  RowState st;
  st.row[0] = qt * kRows + 16 * warp + g;
  st.row[1] = st.row[0] + 8;
  for (int kt = 0; kt <= last_kt; ++kt) {
    const int buf = kt % 2;
    if (kt < last_kt) {
      load_tile<kKeys>(sK(buf ^ 1), k + head * kD, (kt + 1) * kKeys, T);
      load_tile<kKeys>(sV(buf ^ 1), v + head * kD, (kt + 1) * kKeys, T);
    }
    cp_async_commit();
    await_tiles<1>();

    wgmma_fence();
    for (int ks = 0; ks < kD / 16; ++ks)
      product_ss<kKeys, 0>(s, descriptor(sQ + 32 * ks), descriptor(sK(buf) + 32 * ks), ks);
    wgmma_commit();
    wgmma_wait<0>();

    uint32_t p[kKeys / 16][4];
    float alpha[2];
    softmax_tile<kKeys>(s, p, alpha, st, kt, kt == last_kt, T, scale_log2);
    for (int i = 0; i < 32; ++i) o[i] *= alpha[(i % 4) / 2];

    wgmma_fence();
    for (int ks = 0; ks < kKeys / 16; ++ks) product_rs<1>(o, p[ks], descriptor(sV(buf) + 2048 * ks));
    wgmma_commit();
    wgmma_wait<0>();
    __syncthreads();  // every warp is done with this buffer before the next iteration refills it
  }
  store_rows(o, st, out, lse, head, T);
}

// The same with this tile's softmax computed while the previous tile's P V runs (the order of
// FlashAttention-3's loop, inside one warpgroup): per key tile kt, with P(kt) and its alpha
// already computed,
//   issue S(kt + 1); rescale O by alpha(kt); issue P V(kt); wait for S(kt + 1) only; softmax of
//   S(kt + 1) on the CUDA cores while P V(kt) runs on the tensor cores; wait for P V(kt).
// Key and value tiles go round three buffers each, so that a refill never lands on a tile a
// product still reads; the loads for tile kt + 2 (keys) and kt + 1 (values) are issued one tile
// ahead. Two S and two P register sets, so the loop body is written once for each order.
template <int kKeys>
__global__ void __launch_bounds__(kThreads) attention_forward_overlapped(const bf16* q, const bf16* k,
                                                                         const bf16* v, bf16* out, float* lse,
                                                                         int T, float scale) {
  unsigned char* const sQ = aligned_smem();
  auto sK = [&](int tile) { return sQ + (kRows + (tile % 3) * kKeys) * 128; };
  auto sV = [&](int tile) { return sQ + (kRows + (3 + tile % 3) * kKeys) * 128; };
  const int qt = (T + kRows - 1) / kRows - 1 - blockIdx.x;
  const int last_kt = (qt * kRows + kRows - 1) / kKeys;
  const size_t head = (size_t)blockIdx.y * T;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
  const float scale_log2 = scale * 1.4426950408889634f;

  load_tile<kRows>(sQ, q + head * kD, qt * kRows, T);
  load_tile<kKeys>(sK(0), k + head * kD, 0, T);
  cp_async_commit();
  if (last_kt >= 1) load_tile<kKeys>(sK(1), k + head * kD, kKeys, T);
  load_tile<kKeys>(sV(0), v + head * kD, 0, T);
  cp_async_commit();
  await_tiles<1>();

  float o[32] = {}, s_a[kKeys / 2] = {}, s_b[kKeys / 2] = {};
  uint32_t p_a[kKeys / 16][4], p_b[kKeys / 16][4];
  float alpha[2];
  RowState st;
  st.row[0] = qt * kRows + 16 * warp + g;
  st.row[1] = st.row[0] + 8;
  wgmma_fence();
  for (int ks = 0; ks < kD / 16; ++ks)
    product_ss<kKeys, 0>(s_a, descriptor(sQ + 32 * ks), descriptor(sK(0) + 32 * ks), ks);
  wgmma_commit();
  wgmma_wait<0>();
  softmax_tile<kKeys>(s_a, p_a, alpha, st, 0, last_kt == 0, T, scale_log2);

  // p: P(kt), computed; next, p_next: where S(kt + 1) and P(kt + 1) go.
  auto step = [&](uint32_t (&p)[kKeys / 16][4], float (&next)[kKeys / 2], uint32_t (&p_next)[kKeys / 16][4],
                  int kt) {
    await_tiles<0>();  // K(kt + 1) and V(kt)
    if (kt + 2 <= last_kt) load_tile<kKeys>(sK(kt + 2), k + head * kD, (kt + 2) * kKeys, T);
    if (kt + 1 <= last_kt) load_tile<kKeys>(sV(kt + 1), v + head * kD, (kt + 1) * kKeys, T);
    cp_async_commit();
    const bool more = kt + 1 <= last_kt;
    if (more) {
      wgmma_fence();
      for (int ks = 0; ks < kD / 16; ++ks)
        product_ss<kKeys, 0>(next, descriptor(sQ + 32 * ks), descriptor(sK(kt + 1) + 32 * ks), ks);
      wgmma_commit();
    }
    for (int i = 0; i < 32; ++i) o[i] *= alpha[(i % 4) / 2];
    wgmma_fence();
    for (int ks = 0; ks < kKeys / 16; ++ks) product_rs<1>(o, p[ks], descriptor(sV(kt) + 2048 * ks));
    wgmma_commit();
    if (more) {
      wgmma_wait<1>();  // S(kt + 1); P V(kt) may still run
      softmax_tile<kKeys>(next, p_next, alpha, st, kt + 1, kt + 1 == last_kt, T, scale_log2);
    }
    wgmma_wait<0>();
  };
  for (int kt = 0; kt <= last_kt; kt += 2) {
    step(p_a, s_b, p_b, kt);
    if (kt + 1 <= last_kt) step(p_b, s_a, p_a, kt + 1);
  }
  store_rows(o, st, out, lse, head, T);
}

template <int kKeys, bool kOverlapped>
void launch(const Inputs& in) {
  constexpr int kBytes = (kRows + (kOverlapped ? 6 : 4) * kKeys) * 128 + 1024;
  const auto kernel = kOverlapped ? attention_forward_overlapped<kKeys> : attention_forward<kKeys>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
  const dim3 grid((in.T + kRows - 1) / kRows, in.heads);
  kernel<<<grid, kThreads, kBytes>>>(in.q, in.k, in.v, in.out, in.lse, in.T, 1.f / std::sqrt(float(kD)));
  CHECK(cudaGetLastError());
}

}  // namespace

int main() {
  std::mt19937 rng(2026);
  const char* names[] = {"64-key tiles", "128-key tiles", "64-key tiles overlapped", "128-key tiles overlapped"};
  for (int T : {320, 200, 77}) {
    const double e[] = {largest_error(T, rng, launch<64, false>), largest_error(T, rng, launch<128, false>),
                        largest_error(T, rng, launch<64, true>), largest_error(T, rng, launch<128, true>)};
    // bfloat16 P and output: a few units of 2^-8 relative.
    for (int i = 0; i < 4; ++i)
      std::printf("parity T=%d %-25s largest error %.3g (%s)\n", T, names[i], e[i], e[i] < 2e-2 ? "ok" : "WRONG");
  }
  for (int T : {1024, 4096, 16384}) {
    const int heads = 64;  // B = H = 8
    const Inputs in = make_inputs(heads, T, rng);
    const double flops = 4.0 * heads * double(T) * T / 2 * kD;  // two products, causal half
    const double ms[] = {time_ms(in, launch<64, false>), time_ms(in, launch<128, false>),
                         time_ms(in, launch<64, true>), time_ms(in, launch<128, true>)};
    for (int i = 0; i < 4; ++i)
      std::printf("{\"bench\":\"wgmma_attention_forward\",\"variant\":\"%s\",\"T\":%d,\"B\":8,\"H\":8,\"D\":64,"
                  "\"fwd_ms\":%.4f,\"tflops\":%.0f}\n",
                  names[i], T, ms[i], flops / ms[i] / 1e9);
    free_inputs(in);
  }
  return 0;
}
