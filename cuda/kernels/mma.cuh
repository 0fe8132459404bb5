#pragma once
// The one tensor-core instruction linea uses, mma.sync.m16n8k8 with TF32 inputs and float32
// accumulation (sm_80 and newer), and the fragment layout every kernel built on it shares.
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
