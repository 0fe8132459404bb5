#pragma once
// Marks small inline functions that both the CPU kernels and the CUDA kernels (nvcc) compile, so
// that the two backends share one definition of each scalar formula.
#if defined(__CUDACC__)
#define LINEA_HD __host__ __device__ __forceinline__
#else
#define LINEA_HD inline
#endif
