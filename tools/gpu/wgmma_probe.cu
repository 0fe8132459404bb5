// A probe of Hopper's warpgroup products (wgmma) for a future attention kernel: which shared-memory
// descriptor encodings and fragment layouts give the right answer. Not part of the build; on an
// sm_90 GPU, from the repository root:
//   nvcc -std=c++17 -O2 -gencode arch=compute_90a,code=sm_90a -o /tmp/wgmma_probe tools/gpu/wgmma_probe.cu && /tmp/wgmma_probe
// Each case prints "ok" or its largest error against a float64 product on the host. Cases:
//   ss_kmajor   C (64 x 64) = A B^T, A and B 64 x 64 bfloat16 stored row-major (K-major, as q and k
//               tiles are), 128-byte swizzle, four k-steps of 16 (descriptor start + 32 bytes each).
//   ss_nmajor   C = A V, V 64 x 64 stored [k][n] (N-major, as a value tile is: imm-trans-b = 1),
//               several (LBO, SBO) candidates; k-steps advance 16 rows (2048 bytes).
//   rs_kmajor   the same as ss_kmajor with A from registers in mma.m16n8k16's fragment layout
//               (warp w: rows 16w .. 16w + 15), as a probability tile would be.
//   rs_nmajor   A from registers, B = V N-major (the P V product), with each candidate that worked.
// The accumulator layout assumed: warp w, lane 4g + t, register 4i + e holds row 16w + g + 8 (e / 2),
// column 8i + 2t + e % 2 (mma.m16n8k16's, one 16-row slice a warp).
//
// What it printed on an H200 (nvcc 13, 2026-11-29):
//   ss_kmajor  lbo=   16 sbo= 1024  ok (largest error 3.34e-06)
//   rs_kmajor  lbo=   16 sbo= 1024  ok (largest error 3.34e-06)
//   ss_nmajor  lbo=   16 sbo= 1024  ok (largest error 3.64e-06)
//   rs_nmajor  lbo=   16 sbo= 1024  ok (largest error 3.64e-06)
//   ss_nmajor  lbo= 1024 sbo=   16  WRONG (largest error 31.9)
//   ss_nmajor  lbo= 2048 sbo= 1024  ok (largest error 3.64e-06)
//   rs_nmajor  lbo= 2048 sbo= 1024  ok (largest error 3.64e-06)
// So: with the 128-byte swizzle, SBO is the 1024-byte stride between groups of eight 128-byte rows
// and LBO is not used (16 and 2048 both work), in both majors; a k-step moves the start address by
// 32 bytes (K-major) or 16 rows (N-major); registers as A take mma.m16n8k16's A fragments, and the
// accumulator is laid out as assumed. The WRONG case shows that the probe can fail. (Candidates with
// an SBO past 1024 read beyond the 8 KB tile and fault, so they are no longer tried.)
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "probe.cuh"
#include "wgmma.cuh"

__device__ inline uint32_t pair(bf16 lo, bf16 hi) {
  return uint32_t(__bfloat16_as_ushort(lo)) | (uint32_t(__bfloat16_as_ushort(hi)) << 16);
}

// mode 0: ss K-major B; 1: ss N-major B; 2: rs K-major B; 3: rs N-major B. a, b: 64 x 64 row-major.
// B K-major: b[n][k]; N-major: b[k][n]. c: 64 x 64 row-major from the assumed accumulator layout.
__global__ void probe(const bf16* a, const bf16* b, float* c, int mode, int lbo, int sbo) {
  __shared__ __align__(1024) unsigned char sa[64 * 128];
  __shared__ __align__(1024) unsigned char sb[64 * 128];
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) {
    const int r = i / 64, col = i % 64;
    *reinterpret_cast<bf16*>(sa + swizzled(r, col)) = a[i];
    *reinterpret_cast<bf16*>(sb + swizzled(r, col)) = b[i];
  }
  fence_async_shared();
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  float d[32];
  for (float& x : d) x = 0.f;
  wgmma_fence();
  for (int k = 0; k < 4; ++k) {
    const bool n_major = mode == 1 || mode == 3;
    // K-major B: the k-step's 16 columns are 32 bytes along the row; N-major: 16 rows further.
    const uint64_t db = n_major ? descriptor(sb + k * 16 * 128, lbo, sbo, 1) : descriptor(sb + k * 32, 16, 1024, 1);
    if (mode <= 1) {
      const uint64_t da = descriptor(sa + k * 32, 16, 1024, 1);
      if (mode == 0) product_ss<64, 0>(d, da, db, 1);
      else product_ss<64, 1>(d, da, db, 1);
    } else {
      const int r = 16 * warp + g, c0 = 16 * k + 2 * t;
      const uint32_t fa[4] = {pair(a[r * 64 + c0], a[r * 64 + c0 + 1]), pair(a[(r + 8) * 64 + c0], a[(r + 8) * 64 + c0 + 1]),
                              pair(a[r * 64 + c0 + 8], a[r * 64 + c0 + 9]),
                              pair(a[(r + 8) * 64 + c0 + 8], a[(r + 8) * 64 + c0 + 9])};
      if (mode == 2) product_rs<0>(d, fa, db);
      else product_rs<1>(d, fa, db);
    }
  }
  wgmma_commit();
  wgmma_wait<0>();
  for (int i = 0; i < 8; ++i)
    for (int e = 0; e < 4; ++e) c[(16 * warp + g + 8 * (e / 2)) * 64 + 8 * i + 2 * t + e % 2] = d[4 * i + e];
}

int main() {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<bf16> ha(64 * 64), hb(64 * 64);
  std::vector<float> fa(64 * 64), fb(64 * 64);
  for (int i = 0; i < 64 * 64; ++i) {
    ha[i] = __float2bfloat16(normal(rng));
    hb[i] = __float2bfloat16(normal(rng));
    fa[i] = __bfloat162float(ha[i]);
    fb[i] = __bfloat162float(hb[i]);
  }
  bf16 *da, *db;
  float* dc;
  CHECK(cudaMalloc(&da, sizeof(bf16) * 4096));
  CHECK(cudaMalloc(&db, sizeof(bf16) * 4096));
  CHECK(cudaMalloc(&dc, sizeof(float) * 4096));
  CHECK(cudaMemcpy(da, ha.data(), sizeof(bf16) * 4096, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, hb.data(), sizeof(bf16) * 4096, cudaMemcpyHostToDevice));
  const auto run = [&](const char* name, int mode, int lbo, int sbo) {
    CHECK(cudaMemset(dc, 0, sizeof(float) * 4096));
    probe<<<1, 128>>>(da, db, dc, mode, lbo, sbo);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<float> hc(4096);
    CHECK(cudaMemcpy(hc.data(), dc, sizeof(float) * 4096, cudaMemcpyDeviceToHost));
    const bool n_major = mode == 1 || mode == 3;
    double worst = 0;
    for (int m = 0; m < 64; ++m)
      for (int n = 0; n < 64; ++n) {
        double ref = 0;
        for (int k = 0; k < 64; ++k) ref += double(fa[m * 64 + k]) * (n_major ? fb[k * 64 + n] : fb[n * 64 + k]);
        worst = std::fmax(worst, std::fabs(ref - hc[m * 64 + n]));
      }
    std::printf("%-10s lbo=%5d sbo=%5d  %s (largest error %.3g)\n", name, lbo, sbo, worst < 1e-3 ? "ok" : "WRONG", worst);
    return worst < 1e-3;
  };
  run("ss_kmajor", 0, 16, 1024);
  run("rs_kmajor", 2, 16, 1024);
  const int candidates[][2] = {{16, 1024}, {1024, 16}, {2048, 1024}};
  for (const auto& c : candidates)
    if (run("ss_nmajor", 1, c[0], c[1])) run("rs_nmajor", 3, c[0], c[1]);
  return 0;
}
