#pragma once
// Hopper's warpgroup products (wgmma) as the stand-alone probes of tools/gpu/ use them: the
// 128-byte-swizzled shared-memory layout, its matrix descriptors, and the product, fence, commit
// and wait instructions. wgmma_probe.cu checked each encoding (its header has the answer);
// wgmma_attention.cu builds an attention forward on them. sm_90a only.
#include <cuda_bf16.h>

#include <cstdint>

using bf16 = __nv_bfloat16;

// Byte offset of element (r, c) of a tile of 64-element (128-byte) bfloat16 rows in the 128-byte
// swizzle: 16-byte chunk c / 8 of row r lands at chunk (c / 8) ^ (r % 8). The pattern repeats every
// 8 rows (1024 bytes), so a tile starts on a 1024-byte boundary.
__device__ __host__ inline int swizzled(int r, int c) { return r * 128 + (((c / 8) ^ (r % 8)) * 16) + (c % 8) * 2; }

// A shared-memory matrix descriptor: start address, leading and stride byte offsets, swizzle mode
// (1: 128 bytes). In the 128-byte swizzle the stride offset is the 1024 bytes between groups of 8
// rows and the leading offset is not used, whichever the major (wgmma_probe.cu).
__device__ inline uint64_t descriptor(const void* smem, int lbo_bytes = 16, int sbo_bytes = 1024,
                                      int swizzle_mode = 1) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint64_t d = 0;
  d |= uint64_t((a & 0x3FFFF) >> 4);
  d |= uint64_t((lbo_bytes & 0x3FFFF) >> 4) << 16;
  d |= uint64_t((sbo_bytes & 0x3FFFF) >> 4) << 32;
  d |= uint64_t(swizzle_mode) << 62;
  return d;
}

#define D32(x)                                                                                                      \
  "+f"(x[0]), "+f"(x[1]), "+f"(x[2]), "+f"(x[3]), "+f"(x[4]), "+f"(x[5]), "+f"(x[6]), "+f"(x[7]), "+f"(x[8]),    \
      "+f"(x[9]), "+f"(x[10]), "+f"(x[11]), "+f"(x[12]), "+f"(x[13]), "+f"(x[14]), "+f"(x[15]), "+f"(x[16]),    \
      "+f"(x[17]), "+f"(x[18]), "+f"(x[19]), "+f"(x[20]), "+f"(x[21]), "+f"(x[22]), "+f"(x[23]), "+f"(x[24]),   \
      "+f"(x[25]), "+f"(x[26]), "+f"(x[27]), "+f"(x[28]), "+f"(x[29]), "+f"(x[30]), "+f"(x[31])
#define D32_FROM(x, o)                                                                                             \
  "+f"(x[o + 0]), "+f"(x[o + 1]), "+f"(x[o + 2]), "+f"(x[o + 3]), "+f"(x[o + 4]), "+f"(x[o + 5]), "+f"(x[o + 6]),  \
      "+f"(x[o + 7]), "+f"(x[o + 8]), "+f"(x[o + 9]), "+f"(x[o + 10]), "+f"(x[o + 11]), "+f"(x[o + 12]),          \
      "+f"(x[o + 13]), "+f"(x[o + 14]), "+f"(x[o + 15]), "+f"(x[o + 16]), "+f"(x[o + 17]), "+f"(x[o + 18]),       \
      "+f"(x[o + 19]), "+f"(x[o + 20]), "+f"(x[o + 21]), "+f"(x[o + 22]), "+f"(x[o + 23]), "+f"(x[o + 24]),       \
      "+f"(x[o + 25]), "+f"(x[o + 26]), "+f"(x[o + 27]), "+f"(x[o + 28]), "+f"(x[o + 29]), "+f"(x[o + 30]),       \
      "+f"(x[o + 31])
#define REGS32                                                                 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define REGS64                                                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "  \
  "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "   \
  "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "   \
  "%59, %60, %61, %62, %63}"

// One m64nNk16 step of a warpgroup: d = (accumulate ? d : 0) + A B for kN columns (64 or 128),
// both operands from shared memory. B K-major (kTransB = 0: stored [n][k], as key tiles are) or
// N-major (1: stored [k][n], as value tiles are).
template <int kN, int kTransB>
__device__ inline void product_ss(float (&d)[kN / 2], uint64_t a, uint64_t b, int accumulate) {
  if constexpr (kN == 64)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " REGS32 ", %32, %33, p, 1, 1, 0, %35;\n}\n"
        : D32(d)
        : "l"(a), "l"(b), "r"(accumulate), "n"(kTransB));
  else
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " REGS64 ", %64, %65, p, 1, 1, 0, %67;\n}\n"
        : D32_FROM(d, 0), D32_FROM(d, 32)
        : "l"(a), "l"(b), "r"(accumulate), "n"(kTransB));
}
// d += A B (64 columns), A from registers: four bfloat16 pairs a thread in mma.m16n8k16's A layout,
// warp w holding rows 16w .. 16w + 15 (as a probability tile is after the softmax).
template <int kTransB>
__device__ inline void product_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " REGS32 ", {%32, %33, %34, %35}, %36, p, 1, 1, %37;\n}\n"
      : D32(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(kTransB));
}
__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ inline void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory"); }
__device__ inline void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// ---- loading tiles ------------------------------------------------------------------------------

__device__ inline void cp_async16(void* dst, const void* src, int bytes) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending)); }
// Waits until at most kPending cp.async groups are in flight, then makes the tiles that arrived
// visible to wgmma (cp.async writes through the generic proxy, wgmma reads through the async one)
// and to the whole block.
template <int kPending>
__device__ inline void await_tiles() {
  cp_async_wait<kPending>();
  fence_async_shared();
  __syncthreads();
}

// Rows [row0, row0 + kRows) of a (T, 64) bfloat16 matrix into a swizzled tile, by a block of
// kThreads threads (a constant, so that the loop unrolls); rows past T read as 0.
template <int kRows, int kThreads = 128>
__device__ inline void load_tile(unsigned char* tile, const bf16* matrix, int row0, int T) {
  for (int chunk = threadIdx.x; chunk < kRows * 8; chunk += kThreads) {
    const int r = chunk / 8, c = (chunk % 8) * 8;
    const bool in = row0 + r < T;
    cp_async16(tile + swizzled(r, c), matrix + (size_t)(in ? row0 + r : 0) * 64 + c, in ? 16 : 0);
  }
}

// Two floats as a bfloat16 pair (lo in the low half), as an A fragment register holds them.
__device__ inline uint32_t pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Dynamic shared memory (past the 48 KB a static array may take), aligned here to the 1024 bytes
// the swizzle's pattern repeats at.
__device__ inline unsigned char* aligned_smem() {
  extern __shared__ unsigned char smem_raw[];
  return smem_raw + ((1024 - (__cvta_generic_to_shared(smem_raw) & 1023)) & 1023);
}
