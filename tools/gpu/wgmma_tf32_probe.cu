// A probe of Hopper's TF32 warpgroup products (wgmma) for the chunked scan's per-chunk kernels
// (cuda/kernels/chunked_scan_kernels.cuh): does a layout of the chunk's float tiles exist that
// wgmma reads and that the kernels' other accesses read without bank conflicts, and what does one
// 64 x 64 x 64 product cost a 512-thread block with wgmma against the kernels' mma.sync? Not part
// of the build; on an sm_90 GPU, from the repository root:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/wgmma_tf32 tools/gpu/wgmma_tf32_probe.cu && /tmp/wgmma_tf32
//
// TF32 wgmma takes both operands K-major from shared memory (no transposes, unlike 16-bit types).
// The layout tried is the unswizzled ("interleaved") one: core matrices of 8 rows x 4 floats, each
// 128 contiguous bytes, the leading byte offset (LBO) between core matrices along K and the stride
// byte offset (SBO) between groups of 8 rows. With LBO = 144 bytes (36 floats) instead of 128 a
// row's 64 floats fall in 32 different banks per 32 neighbours (c -> bank c), an mma fragment's
// 8 rows x 4 columns too, and so do the kernels' transposed reads (rows 2t, 2t + 1, column g);
// SBO = 16 x 144 = 2304 bytes. Element (r, c) of a 64 x 64 tile: (r / 8) 576 + (c / 4) 36 +
// (r % 8) 4 + c % 4 floats (4,608 a tile, the kernels' rows of 68 take 4,352).
//
// Correctness: C = A B^T for A, B 64 x 64 (B stored [n][k], as a key tile is for q k^T), inputs
// rounded to TF32 on the host, checked against a float64 product:
//   n64       one warpgroup, m64n64k8, eight k-steps (descriptor start + 2 LBO each)
//   n16x4     four warpgroups, m64n16k8 each for columns 16 g .. 16 g + 15: every warp then holds
//             rows 16 (w % 4) .. + 15 of its warpgroup's 16 columns in mma.m16n8k8's accumulator
//             layout, which is a per-chunk kernel's warp with stripe w % 4 and column part w / 4
//   swapped   LBO and SBO exchanged: must be WRONG (the probe can fail)
// Timing: 132 blocks of 512 threads (one an SM, as the per-chunk kernels), each doing `kReps`
// products of the same tiles, a __syncthreads after each (as between the kernels' products),
// cycles per product from clock64:
//   mma.sync    16 warps, warp w rows 16 (w / 4), columns 16 (w % 4) .. + 15, operands loaded
//               from rows of 68 floats (already TF32), as warp_product does
//   wgmma n16x4 the four warpgroups' m64n16k8 above, then wait for them
//   wgmma n64   warpgroup 0 alone does the whole product (m64n64k8), the others wait at the barrier
//   wgmma n64 x4  every warpgroup does a whole product of its own at the same time (four products)
//
// What it printed on an H200 (nvcc 13, 2026-12-02; the timings of a second run in brackets):
//   n64      lbo=  144 sbo= 2304  ok (largest error 6.98e-06)
//   n16x4    lbo=  144 sbo= 2304  ok (largest error 6.98e-06)
//   mma.sync (16 warps)        1303 cycles a product and barrier (378.3 us for 512)   [1307]
//   wgmma n16x4                 912 cycles a product and barrier (264.9 us for 512)   [898]
//   wgmma n64 (1 warpgroup)     588 cycles a product and barrier (172.3 us for 512)   [589]
//   wgmma n64 x4 (4 products)  1301 cycles a product and barrier (376.3 us for 512)   [1297]
//   swapped  lbo= 2304 sbo=  144  WRONG (largest error 44.4)
// (An earlier build without the last case: 1246, 838 and 487 cycles.) So the padded unswizzled
// layout works for TF32 wgmma with LBO = 144 and SBO = 2304 bytes, and the n16x4 accumulators are
// the kernels' own layout under the warp numbering above. A product costs the block 0.69 of
// mma.sync's time when the four warpgroups split its columns and 0.45 when one warpgroup does it
// whole (fewer, larger instructions); four warpgroups each doing a product of their own finish
// all four in the time mma.sync takes for one (85% of the H200's dense TF32 rate). The per-chunk
// kernels' independent products (the update, the state terms, the two sides' scores) could thus
// run one a warpgroup side by side.
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "../../cuda/kernels/mma.cuh"  // mma_tf32, the kernels' own
#include "probe.cuh"
#include "wgmma.cuh"

using linea::cuda::mma_tf32;

constexpr int kCore = 36, kGroup = 16 * kCore, kTile = 8 * kGroup;  // floats
constexpr int kPitch = 68;                                           // the kernels' rows
constexpr int kReps = 512;

__host__ __device__ inline int interleaved(int r, int c) { return (r / 8) * kGroup + (c / 4) * kCore + (r % 8) * 4 + c % 4; }

// Nearest TF32 (ties away from zero, as cvt.rna), for finite x.
float tf32_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &u, 4);
  return x;
}

__device__ inline void product_n16(float (&d)[8], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b));
}
__device__ inline void product_n64(float (&d)[32], uint64_t a, uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 " REGS32 ", %32, %33, p, 1, 1;\n}\n"
               : D32(d)
               : "l"(a), "l"(b));
}
// The descriptor of rows [row0, row0 + 8 groups) of a tile at k-step k (8 columns: 2 core matrices).
__device__ inline uint64_t tile_descriptor(const float* tile, int row0, int k, int lbo, int sbo) {
  return descriptor(tile + (row0 / 8) * kGroup + 2 * k * kCore, lbo, sbo, 0);
}

// Both tiles from row-major 64 x 64 inputs into the interleaved layout and into rows of 68.
__device__ inline void stage(float* sa, float* sb, float* pa, float* pb, const float* a, const float* b) {
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) {
    const int r = i / 64, c = i % 64;
    sa[interleaved(r, c)] = a[i], sb[interleaved(r, c)] = b[i];
    pa[r * kPitch + c] = a[i], pb[r * kPitch + c] = b[i];
  }
  fence_async_shared();
  __syncthreads();
}

// mode 0: n64 (128 threads); 1: n16x4 (512 threads). c: 64 x 64 row-major from the accumulators.
__global__ void check(const float* a, const float* b, float* c, int mode, int lbo, int sbo) {
  extern __shared__ __align__(1024) float smem[];
  float *sa = smem, *sb = sa + kTile, *pa = sb + kTile, *pb = pa + 64 * kPitch;
  stage(sa, sb, pa, pb, a, b);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int group = warp / 4, row0 = 16 * (warp % 4);
  if (mode == 0) {
    float d[32] = {};
    wgmma_fence();
    for (int k = 0; k < 8; ++k) product_n64(d, tile_descriptor(sa, 0, k, lbo, sbo), tile_descriptor(sb, 0, k, lbo, sbo));
    wgmma_commit();
    wgmma_wait<0>();
    for (int i = 0; i < 8; ++i)
      for (int e = 0; e < 4; ++e) c[(row0 + g + 8 * (e / 2)) * 64 + 8 * i + 2 * t + e % 2] = d[4 * i + e];
  } else {
    float d[8] = {};
    wgmma_fence();
    for (int k = 0; k < 8; ++k)
      product_n16(d, tile_descriptor(sa, 0, k, lbo, sbo), tile_descriptor(sb, 16 * group, k, lbo, sbo));
    wgmma_commit();
    wgmma_wait<0>();
    for (int i = 0; i < 2; ++i)
      for (int e = 0; e < 4; ++e) c[(row0 + g + 8 * (e / 2)) * 64 + 16 * group + 8 * i + 2 * t + e % 2] = d[4 * i + e];
  }
}

// Cycles per product (block 0's thread 0 writes them); sink keeps the sums alive.
__global__ void __launch_bounds__(512, 1) timed(const float* a, const float* b, int mode, long long* cycles, float* sink) {
  extern __shared__ __align__(1024) float smem[];
  float *sa = smem, *sb = sa + kTile, *pa = sb + kTile, *pb = pa + 64 * kPitch;
  stage(sa, sb, pa, pb, a, b);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  float d[32] = {};
  const long long start = clock64();
  for (int rep = 0; rep < kReps; ++rep) {
    if (mode == 0) {  // mma.sync, as warp_product
      const int r0 = 16 * (warp / 4), n0 = 16 * (warp % 4);
#pragma unroll 2
      for (int k0 = 0; k0 < 64; k0 += 8) {
        const float af[4] = {pa[(r0 + g) * kPitch + k0 + t], pa[(r0 + g + 8) * kPitch + k0 + t],
                             pa[(r0 + g) * kPitch + k0 + t + 4], pa[(r0 + g + 8) * kPitch + k0 + t + 4]};
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          float(&acc)[4] = *reinterpret_cast<float(*)[4]>(d + 4 * n);
          mma_tf32(acc, af, pb[(n0 + 8 * n + g) * kPitch + k0 + t], pb[(n0 + 8 * n + g) * kPitch + k0 + t + 4]);
        }
      }
    } else if (mode == 1) {  // four warpgroups, m64n16k8
      float(&acc)[8] = *reinterpret_cast<float(*)[8]>(d);
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < 8; ++k)
        product_n16(acc, tile_descriptor(sa, 0, k, 144, 2304), tile_descriptor(sb, 16 * (warp / 4), k, 144, 2304));
      wgmma_commit();
      wgmma_wait<0>();
    } else if (mode == 3 || warp < 4) {  // warpgroup 0 alone (mode 2) or each its own product (3), m64n64k8
      wgmma_fence();
#pragma unroll
      for (int k = 0; k < 8; ++k) product_n64(d, tile_descriptor(sa, 0, k, 144, 2304), tile_descriptor(sb, 0, k, 144, 2304));
      wgmma_commit();
      wgmma_wait<0>();
    }
    __syncthreads();
  }
  const long long stop = clock64();
  float sum = 0;
  for (float x : d) sum += x;
  sink[blockIdx.x * blockDim.x + threadIdx.x] = sum;
  if (blockIdx.x == 0 && threadIdx.x == 0) cycles[mode] = (stop - start) / kReps;
}

int main() {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> ha(4096), hb(4096);
  for (int i = 0; i < 4096; ++i) ha[i] = tf32_of(normal(rng)), hb[i] = tf32_of(normal(rng));
  float *da, *db, *dc, *sink;
  long long* cycles;
  CHECK(cudaMalloc(&da, 4 * 4096));
  CHECK(cudaMalloc(&db, 4 * 4096));
  CHECK(cudaMalloc(&dc, 4 * 4096));
  CHECK(cudaMalloc(&sink, 4 * 132 * 512));
  CHECK(cudaMalloc(&cycles, 8 * 4));
  CHECK(cudaMemcpy(da, ha.data(), 4 * 4096, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, hb.data(), 4 * 4096, cudaMemcpyHostToDevice));
  const size_t bytes = 4 * (2 * kTile + 2 * 64 * kPitch);
  CHECK(cudaFuncSetAttribute(check, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  CHECK(cudaFuncSetAttribute(timed, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  const auto run = [&](const char* name, int mode, int lbo, int sbo) {
    CHECK(cudaMemset(dc, 0, 4 * 4096));
    check<<<1, mode == 0 ? 128 : 512, bytes>>>(da, db, dc, mode, lbo, sbo);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<float> hc(4096);
    CHECK(cudaMemcpy(hc.data(), dc, 4 * 4096, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int m = 0; m < 64; ++m)
      for (int n = 0; n < 64; ++n) {
        double ref = 0;
        for (int k = 0; k < 64; ++k) ref += double(ha[m * 64 + k]) * hb[n * 64 + k];
        worst = std::fmax(worst, std::fabs(ref - hc[m * 64 + n]));
      }
    std::printf("%-8s lbo=%5d sbo=%5d  %s (largest error %.3g)\n", name, lbo, sbo, worst < 1e-3 ? "ok" : "WRONG", worst);
  };
  run("n64", 0, 144, 2304);
  run("n16x4", 1, 144, 2304);
  const char* names[] = {"mma.sync (16 warps)", "wgmma n16x4", "wgmma n64 (1 warpgroup)", "wgmma n64 x4 (4 products)"};
  for (int mode = 0; mode < 4; ++mode) {
    const double us = time_us([&] { timed<<<132, 512, bytes>>>(da, db, mode, cycles, sink); }, 5);
    CHECK(cudaGetLastError());
    long long c[4];
    CHECK(cudaMemcpy(c, cycles, sizeof(c), cudaMemcpyDeviceToHost));
    std::printf("%-24s %6lld cycles a product and barrier (%.1f us for %d)\n", names[mode], c[mode], us, kReps);
  }
  run("swapped", 1, 2304, 144);  // last: a wrong descriptor could fault
  return 0;
}
