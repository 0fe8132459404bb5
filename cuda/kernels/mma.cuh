#pragma once
// The tensor-core instructions linea uses, mma.sync.m16n8k8 with TF32 inputs and m16n8k16 with
// bfloat16 inputs, both with float32 accumulation (sm_80 and newer), and their fragment layouts.
//
// Fragments (PTX ISA, mma.m16n8k8 .tf32), lane = 4 g + t: A (16 x 8, row-major) holds
// (g, t) (g+8, t) (g, t+4) (g+8, t+4); B (8 x 8) holds (k=t, n=g) (k=t+4, n=g); the accumulator
// C (16 x 8) holds (g, 2t) (g, 2t+1) (g+8, 2t) (g+8, 2t+1).
#include <cstdint>

namespace linea::cuda {

// TF32 needs sm_80 or newer. A build for older GPUs compiles the kernels that use it without the
// instructions, and the host never launches them (each family checks the PTX version it got).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define LINEA_NO_TF32_MMA 1
#endif

// x rounded to TF32 (10 explicit mantissa bits), to nearest.
__device__ __forceinline__ float to_tf32(float x) {
#ifdef LINEA_NO_TF32_MMA
  return x;
#else
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
#endif
}

// c += a b for one 16 x 8 x 8 product; a and b already rounded to TF32.
__device__ __forceinline__ void mma_tf32(float (&c)[4], const float (&a)[4], float b0, float b1) {
#ifdef LINEA_NO_TF32_MMA
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])),
        "r"(__float_as_uint(a[3])), "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)));
#endif
}

// ---- bfloat16 (attention_tf32.cu's bfloat16 kernels, the chunked scan's bfloat16 products). mma.sync.m16n8k16 with bfloat16 inputs and
// float32 accumulation, twice TF32's rate. Fragments (PTX ISA, .bf16), each 32-bit register a pair
// of bfloat16 along k (the lower k in the low half): A (16 x 16, row-major) holds the pairs at
// (g, 2t) (g+8, 2t) (g, 2t+8) (g+8, 2t+8); B (16 x 8) holds (k=2t, n=g) (k=2t+8, n=g); the
// accumulator is m16n8k8's.

// c += a b for one 16 x 8 x 16 product.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#ifdef LINEA_NO_TF32_MMA
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// c = a b for one 16 x 8 x 16 product: the accumulator starts at zero without zeroing its
// registers first (the zero operand is one register for all four).
__device__ __forceinline__ void mma_bf16_from_zero(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#ifdef LINEA_NO_TF32_MMA
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
      : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
#endif
}

// Two floats rounded to bfloat16 (to nearest even) as one fragment register: lo at the lower k.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
#ifdef LINEA_NO_TF32_MMA
  return 0;
#else
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));  // the first source goes high
  return r;
#endif
}

// The two bfloat16 of a fragment register (pack_bf16), widened exactly to float.
__device__ __forceinline__ float bf16_low(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float bf16_high(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

// Four 8 x 8 matrices of bfloat16 from shared memory, one register each: lanes 8i .. 8i + 7 give
// the addresses of matrix i's 8 rows (8 contiguous bfloat16 each, 16-byte aligned). Plain, lane
// 4 g + t receives the pair at (row g, columns 2t, 2t + 1) of each matrix: an A or a B fragment
// of rows stored along k. Transposed (ldmatrix .trans), it receives (rows 2t, 2t + 1, column g):
// a B fragment of a tile stored [k][n].
template <bool kTransposed = false>
__device__ __forceinline__ void load_matrices(uint32_t (&r)[4], const void* row_of_this_lane) {
#ifdef LINEA_NO_TF32_MMA
  r[0] = r[1] = r[2] = r[3] = 0;
#else
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(row_of_this_lane));
  if constexpr (kTransposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
#endif
}

// 2^x in one instruction (ex2.approx.ftz: about 2 ulp, results below 2^-126 flushed to zero);
// exp2f adds a denormal fix-up around the same instruction. Used where the result is a softmax
// weight, whose denormal values add nothing a float32 sum would keep.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// A thread's place in the fragments: lane = 4 g + t.
struct FragmentLane {
  int g, t;
};
__device__ __forceinline__ FragmentLane fragment_lane() {
  const int lane = static_cast<int>(threadIdx.x % 32);
  return {lane / 4, lane % 4};
}
// The row (0..15) of accumulator element e (its column: Columns::of, chunked_scan.cuh).
__device__ __forceinline__ int fragment_row(const FragmentLane& l, int e) { return l.g + 8 * (e >> 1); }

}  // namespace linea::cuda
