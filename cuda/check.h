#pragma once
// Every CUDA runtime call, kernel launch and cuBLAS call is checked: a failure becomes a
// linea::Error naming the call, the op and the sizes involved, never an abort.
//
//   LINEA_CUDA_CHECK(cudaMemsetAsync(p, 0, n, s), "index_select", "n=", n);
//   kernel<<<grid, block, 0, stream>>>(...);
//   LINEA_CUDA_LAUNCH_CHECK("index_select", "n=", n);          // cuda/launch.cuh
//   LINEA_CUBLAS_CHECK(cublasGemmEx(...), "matmul", "m=", m);
//
// Kernels run asynchronously, so a fault inside one (an illegal address) surfaces at the next
// synchronizing call, which then names itself rather than the kernel; run with
// CUDA_LAUNCH_BLOCKING=1 to make every launch synchronous and the report exact.
#include <cuda_runtime.h>

#include "tensor/error.h"

namespace linea::cuda {

// cuBLAS's name for a status code (cublasStatus_t passed as int, so that this header does not
// pull in the cuBLAS headers; defined in cuda/cublas.cpp).
const char* cublas_status_string(int status);

}  // namespace linea::cuda

#define LINEA_CUDA_CHECK(call, op, ...)                                                     \
  do {                                                                                      \
    const cudaError_t linea_status_ = (call);                                               \
    if (linea_status_ != cudaSuccess) {                                                     \
      cudaGetLastError(); /* clear a non-sticky error so the next call starts clean */     \
      ::linea::fail(op, #call " failed: ", cudaGetErrorString(linea_status_) __VA_OPT__(, " (", ) __VA_ARGS__ __VA_OPT__(, ")")); \
    }                                                                                       \
  } while (0)

#define LINEA_CUBLAS_CHECK(call, op, ...)                                                   \
  do {                                                                                      \
    const int linea_status_ = static_cast<int>(call);                                       \
    if (linea_status_ != 0 /* CUBLAS_STATUS_SUCCESS */)                                     \
      ::linea::fail(op, #call " failed: ", ::linea::cuda::cublas_status_string(linea_status_) \
                    __VA_OPT__(, " (", ) __VA_ARGS__ __VA_OPT__(, ")"));                    \
  } while (0)
