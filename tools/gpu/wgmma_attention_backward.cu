// The key side of a causal attention backward in bfloat16 (dk and dv, the larger of linea's two
// backward kernels) with Hopper's warpgroup products (wgmma), written plainly: what the backward,
// whose four products share each exponential (the forward's two share one), gains from wgmma.
// Not part of the build; on an sm_90 GPU, from the repository root:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/wgmma_backward tools/gpu/wgmma_attention_backward.cu && /tmp/wgmma_backward
// and linea's dk/dv kernel alone in the same run under ncu (docs/benchmarks.md, twenty-sixth
// session, has the command).
//
// The kernel: one warpgroup (128 threads) per 64 keys of one (batch, head), head dim 64. The key
// and value tiles stay in shared memory; query, output-gradient, lse and delta tiles of 64 rows
// stream through two buffers (cp.async). Per query tile, transposed as keys x queries:
//   S^T = K Q^T and dP^T = V dO^T      eight m64n64k16 products from shared memory (K-major);
//   P^T = exp2(S^T scale log2 e - lse log2 e), dS^T = P^T (dP^T - delta), both to bfloat16
//   registers as A operands;
//   dV += P^T dO and dK += dS^T Q       eight more, B N-major ([query][d] tiles as they lie).
// dK is scaled once at the end. Checked against a float32 reference (one thread a key) at awkward
// lengths, then timed at T = 1k, 4k and 16k, B = H = 8.
//
// On an H200 (nvcc 13, 2026-11-29): parity 0.0037 - 0.0038 (largest error relative to
// 1 + |reference|); 0.094 / 0.996 / 14.13 ms at 1k / 4k / 16k (CUDA events: 183 / 276 / 311
// TFLOP/s). Under ncu in the same run, where clocks are held alike: 1.27 - 1.30 and 18.15 ms at 4k
// and 16k, against 1.29 and 17.99 ms for linea's dkdv_kernel (mma.sync, two 16-row blocks a warp,
// tuned over several sessions). So the plain port to wgmma only matches it: like the forward
// (wgmma_attention.cu), the products wait on the exponentials and the float32 work between them,
// which no variant here overlaps with them.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "probe.cuh"
#include "wgmma.cuh"

namespace {

constexpr int kD = 64, kTile = 64, kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;

// Byte layout of the dynamic shared memory: the block's keys and values, then two stages of a
// query tile's q, dO (swizzled 64 x 64 bfloat16), lse and delta (64 floats each). A stage is padded
// to a multiple of 1024 bytes, so that every tile starts where the swizzle's pattern does.
constexpr int kTileBytes = kTile * 128, kStatBytes = kTile * 4;
constexpr int kStageBytes = (2 * kTileBytes + 2 * kStatBytes + 1023) / 1024 * 1024;
constexpr int kSmemBytes = 2 * kTileBytes + 2 * kStageBytes + 1024;

// 64 floats (rows past T: zeros), one a thread: plain loads, as a head's rows of lse and delta
// start wherever T puts them (cp.async needs 16-byte alignment).
__device__ inline void load_stats(unsigned char* dst, const float* src, int row0, int T) {
  if (threadIdx.x < kTile)
    reinterpret_cast<float*>(dst)[threadIdx.x] = row0 + threadIdx.x < T ? src[row0 + threadIdx.x] : 0.f;
}

// q, k, v, dout: (B H, T, 64) bfloat16; lse (natural log) and delta = rowsum(dout * out): (B H, T)
// float32. dk, dv: (B H, T, 64) bfloat16.
__global__ void __launch_bounds__(kThreads) dkdv(const bf16* q, const bf16* k, const bf16* v, const bf16* dout,
                                                 const float* lse, const float* delta, bf16* dk, bf16* dv, int T,
                                                 float scale) {
  unsigned char* const sK = aligned_smem();
  unsigned char* const sV = sK + kTileBytes;
  auto stage = [&](int tile) { return sK + 2 * kTileBytes + (tile % 2) * kStageBytes; };
  auto sQ = [&](int tile) { return stage(tile); };
  auto sdO = [&](int tile) { return stage(tile) + kTileBytes; };
  auto sLse = [&](int tile) { return reinterpret_cast<const float*>(stage(tile) + 2 * kTileBytes); };
  auto sDelta = [&](int tile) { return reinterpret_cast<const float*>(stage(tile) + 2 * kTileBytes + kStatBytes); };
  const int tiles = (T + kTile - 1) / kTile;
  const int kt = blockIdx.x;  // the block's key tile; query tiles kt .. tiles - 1 see it
  const size_t head = (size_t)blockIdx.y * T;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const float scale_log2 = scale * kLog2e;

  auto load_queries = [&](int qt) {
    unsigned char* const s = stage(qt);
    load_tile<kTile>(s, q + head * kD, qt * kTile, T);
    load_tile<kTile>(s + kTileBytes, dout + head * kD, qt * kTile, T);
    load_stats(s + 2 * kTileBytes, lse + head, qt * kTile, T);
    load_stats(s + 2 * kTileBytes + kStatBytes, delta + head, qt * kTile, T);
  };
  load_tile<kTile>(sK, k + head * kD, kt * kTile, T);
  load_tile<kTile>(sV, v + head * kD, kt * kTile, T);
  load_queries(kt);
  cp_async_commit();

  float acc_dk[32] = {}, acc_dv[32] = {}, st[32] = {}, dpt[32] = {};
  // Register 4i + e of a (keys x queries) tile: key row key_row[e / 2], query column 8i + 2t + e % 2.
  const int key_row[2] = {kt * kTile + 16 * warp + g, kt * kTile + 16 * warp + g + 8};
  for (int qt = kt; qt < tiles; ++qt) {
    if (qt + 1 < tiles) load_queries(qt + 1);
    cp_async_commit();
    await_tiles<1>();

    wgmma_fence();
    for (int ks = 0; ks < kD / 16; ++ks)
      product_ss<64, 0>(st, descriptor(sK + 32 * ks), descriptor(sQ(qt) + 32 * ks), ks);
    for (int ks = 0; ks < kD / 16; ++ks)
      product_ss<64, 0>(dpt, descriptor(sV + 32 * ks), descriptor(sdO(qt) + 32 * ks), ks);
    wgmma_commit();
    wgmma_wait<0>();

    const float* const lse_tile = sLse(qt);
    const float* const delta_tile = sDelta(qt);
    uint32_t p[4][4], ds[4][4];
    for (int ks = 0; ks < 4; ++ks) {
      float pv[8], dsv[8];
      for (int j = 0; j < 8; ++j) {
        const int i = 2 * ks + j / 4, e = j % 4, col = 8 * i + 2 * t + e % 2, query = qt * kTile + col;
        const bool seen = query >= key_row[e / 2] && query < T;
        pv[j] = seen ? exp2f(st[4 * i + e] * scale_log2 - lse_tile[col] * kLog2e) : 0.f;
        dsv[j] = pv[j] * (dpt[4 * i + e] - delta_tile[col]);
      }
      p[ks][0] = pack(pv[0], pv[1]), p[ks][1] = pack(pv[2], pv[3]), p[ks][2] = pack(pv[4], pv[5]),
      p[ks][3] = pack(pv[6], pv[7]);
      ds[ks][0] = pack(dsv[0], dsv[1]), ds[ks][1] = pack(dsv[2], dsv[3]), ds[ks][2] = pack(dsv[4], dsv[5]),
      ds[ks][3] = pack(dsv[6], dsv[7]);
    }

    wgmma_fence();
    for (int ks = 0; ks < kTile / 16; ++ks) product_rs<1>(acc_dv, p[ks], descriptor(sdO(qt) + 2048 * ks));
    for (int ks = 0; ks < kTile / 16; ++ks) product_rs<1>(acc_dk, ds[ks], descriptor(sQ(qt) + 2048 * ks));
    wgmma_commit();
    wgmma_wait<0>();
    __syncthreads();  // every warp is done with this stage before the next iteration refills it
  }

  for (int i = 0; i < 8; ++i)
    for (int e = 0; e < 4; e += 2) {
      const int r = key_row[e / 2];
      if (r >= T) continue;
      const size_t at = (head + r) * kD + 8 * i + 2 * t;
      *reinterpret_cast<__nv_bfloat162*>(dk + at) =
          __floats2bfloat162_rn(acc_dk[4 * i + e] * scale, acc_dk[4 * i + e + 1] * scale);
      *reinterpret_cast<__nv_bfloat162*>(dv + at) = __floats2bfloat162_rn(acc_dv[4 * i + e], acc_dv[4 * i + e + 1]);
    }
}

// ---- the float32 reference ----------------------------------------------------------------------

__device__ inline float dot_rows(const bf16* a, const bf16* b) {
  float x = 0.f;
  for (int d = 0; d < kD; ++d) x += __bfloat162float(a[d]) * __bfloat162float(b[d]);
  return x;
}

// One thread a query row: lse (natural log) and delta = rowsum(dout * out) of the causal softmax.
__global__ void reference_statistics(const bf16* q, const bf16* k, const bf16* v, const bf16* dout, float* lse,
                                     float* delta, int T, float scale) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= T) return;
  const size_t head = (size_t)blockIdx.y * T;
  float mx = -INFINITY;
  for (int j = 0; j <= r; ++j) mx = fmaxf(mx, scale * dot_rows(q + (head + r) * kD, k + (head + j) * kD));
  float sum = 0.f, out[kD] = {};
  for (int j = 0; j <= r; ++j) {
    const float p = expf(scale * dot_rows(q + (head + r) * kD, k + (head + j) * kD) - mx);
    sum += p;
    for (int d = 0; d < kD; ++d) out[d] += p * __bfloat162float(v[(head + j) * kD + d]);
  }
  float dot = 0.f;
  for (int d = 0; d < kD; ++d) dot += __bfloat162float(dout[(head + r) * kD + d]) * out[d] / sum;
  lse[head + r] = mx + logf(sum);
  delta[head + r] = dot;
}

// One thread a key row: dk and dv in float32.
__global__ void reference_dkdv(const bf16* q, const bf16* k, const bf16* v, const bf16* dout, const float* lse,
                               const float* delta, float* dk, float* dv, int T, float scale) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= T) return;
  const size_t head = (size_t)blockIdx.y * T;
  float gk[kD] = {}, gv[kD] = {};
  for (int r = j; r < T; ++r) {
    const float p = expf(scale * dot_rows(q + (head + r) * kD, k + (head + j) * kD) - lse[head + r]);
    const float ds = p * (dot_rows(dout + (head + r) * kD, v + (head + j) * kD) - delta[head + r]);
    for (int d = 0; d < kD; ++d) {
      gv[d] += p * __bfloat162float(dout[(head + r) * kD + d]);
      gk[d] += scale * ds * __bfloat162float(q[(head + r) * kD + d]);
    }
  }
  for (int d = 0; d < kD; ++d) {
    dk[(head + j) * kD + d] = gk[d];
    dv[(head + j) * kD + d] = gv[d];
  }
}

// ---- the run ------------------------------------------------------------------------------------

struct Problem {
  int heads, T;
  bf16 *q, *k, *v, *dout, *dk, *dv;  // one allocation, q first
  float *lse, *delta;                // one allocation, lse first
};

Problem make_problem(int heads, int T, std::mt19937& rng) {
  const size_t n = (size_t)heads * T * kD;
  std::normal_distribution<float> normal;
  std::vector<bf16> host(4 * n);
  for (bf16& x : host) x = __float2bfloat16(normal(rng));
  Problem pr{heads, T};
  CHECK(cudaMalloc(&pr.q, sizeof(bf16) * 6 * n));
  pr.k = pr.q + n, pr.v = pr.k + n, pr.dout = pr.v + n, pr.dk = pr.dout + n, pr.dv = pr.dk + n;
  CHECK(cudaMemcpy(pr.q, host.data(), sizeof(bf16) * 4 * n, cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&pr.lse, sizeof(float) * 2 * heads * T));
  pr.delta = pr.lse + (size_t)heads * T;
  const float scale = 1.f / std::sqrt(float(kD));
  reference_statistics<<<dim3((T + 127) / 128, heads), 128>>>(pr.q, pr.k, pr.v, pr.dout, pr.lse, pr.delta, T, scale);
  CHECK(cudaGetLastError());
  return pr;
}

void free_problem(const Problem& pr) {
  CHECK(cudaFree(pr.q));
  CHECK(cudaFree(pr.lse));
}

void launch(const Problem& pr) {
  CHECK(cudaFuncSetAttribute(dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  dkdv<<<dim3((pr.T + kTile - 1) / kTile, pr.heads), kThreads, kSmemBytes>>>(
      pr.q, pr.k, pr.v, pr.dout, pr.lse, pr.delta, pr.dk, pr.dv, pr.T, 1.f / std::sqrt(float(kD)));
  CHECK(cudaGetLastError());
}

// Largest error of dk and dv against the reference, relative to 1 + |reference|.
double parity(int T, std::mt19937& rng) {
  const int heads = 3;
  const Problem pr = make_problem(heads, T, rng);
  const size_t n = (size_t)heads * T * kD;
  float* ref;
  CHECK(cudaMalloc(&ref, sizeof(float) * 2 * n));
  launch(pr);
  reference_dkdv<<<dim3((T + 127) / 128, heads), 128>>>(pr.q, pr.k, pr.v, pr.dout, pr.lse, pr.delta, ref, ref + n, T,
                                                        1.f / std::sqrt(float(kD)));
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<bf16> got(2 * n);
  std::vector<float> want(2 * n);
  CHECK(cudaMemcpy(got.data(), pr.dk, sizeof(bf16) * 2 * n, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(want.data(), ref, sizeof(float) * 2 * n, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (size_t i = 0; i < 2 * n; ++i)
    worst = std::fmax(worst, std::fabs(double(__bfloat162float(got[i])) - want[i]) / (1 + std::fabs(want[i])));
  CHECK(cudaFree(ref));
  free_problem(pr);
  return worst;
}

}  // namespace

int main() {
  std::mt19937 rng(2026);
  for (int T : {320, 200, 77}) {
    const double e = parity(T, rng);
    // bfloat16 P^T, dS^T and outputs over up to T terms: a few units of 2^-8 relative.
    std::printf("parity T=%d: dk and dv, largest error %.3g (%s)\n", T, e, e < 3e-2 ? "ok" : "WRONG");
  }
  for (int T : {1024, 4096, 16384}) {
    const int heads = 64;  // B = H = 8
    const Problem pr = make_problem(heads, T, rng);
    CHECK(cudaDeviceSynchronize());
    const double ms = time_us([&] { launch(pr); }) / 1000;
    const double flops = 4.0 * heads * double(T) * T * kD;  // four products, causal half
    std::printf("{\"bench\":\"wgmma_attention_dkdv\",\"T\":%d,\"B\":8,\"H\":8,\"D\":64,\"dkdv_ms\":%.4f,\"tflops\":%.0f}\n",
                T, ms, flops / ms / 1e9);
    free_problem(pr);
  }
  return 0;
}
