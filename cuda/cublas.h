#pragma once
// cuBLAS: one handle per device, bound to the device's stream (cuda/stream.h), so GEMMs order
// with the kernels around them. The TF32 switch is declared in cuda/backend.h (CPU code sets it).
#include <cublas_v2.h>

namespace linea::cuda {

// The handle of `device`, created on first use; the caller has made the device current
// (use_device). Lives as long as the process.
cublasHandle_t cublas_handle(int device);

}  // namespace linea::cuda
