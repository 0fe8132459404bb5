// Random fills on CUDA from the counter-based Philox stream (tensor/philox.h): element i gets the
// number at counter offset + i, exactly as on the CPU. Uniform numbers are bit-identical to the
// CPU's; normal ones go through log and cos, whose CUDA and glibc versions may differ in the
// last bit of a double.
#include "cuda/cuda_backend.h"
#include "cuda/launch.cuh"
#include "tensor/philox.h"

namespace linea::cuda {

namespace {

// The arithmetic is written with __dadd_rn / __dmul_rn so that nvcc does not contract it into
// an fma, which the CPU does not use: the same rounding on both sides.
template <class T>
__global__ void uniform_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, double low, double high) {
  LINEA_GRID_STRIDE_LOOP(i, n) {
    // uniform() is in (0, 1]; 1 - u is in [0, 1). Rounding to T can land on high: step back.
    const double u = 1.0 - philox::uniform(seed, offset + static_cast<uint64_t>(i));
    T v = static_cast<T>(__dadd_rn(low, __dmul_rn(high - low, u)));
    if (v >= static_cast<T>(high) && high > low) v = nextafter(static_cast<T>(high), static_cast<T>(low));
    out[i] = v;
  }
}

template <class T>
__global__ void normal_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, double mean, double stddev) {
  LINEA_GRID_STRIDE_LOOP(i, n) {
    out[i] = static_cast<T>(__dadd_rn(mean, __dmul_rn(stddev, philox::normal(seed, offset + static_cast<uint64_t>(i)))));
  }
}

}  // namespace

void CudaBackend::uniform(const Tensor& out, uint64_t seed, uint64_t offset, double low, double high) const {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_floating(out.dtype(), "uniform", [&]<class T>() {
    const cudaStream_t stream = use_device(device_);
    uniform_kernel<T><<<blocks_for(n, device_), kThreads, 0, stream>>>(out.data<T>(), n, seed, offset, low, high);
    LINEA_CUDA_LAUNCH_CHECK("uniform", out.describe());
  });
}

void CudaBackend::normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double stddev) const {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_floating(out.dtype(), "normal", [&]<class T>() {
    const cudaStream_t stream = use_device(device_);
    normal_kernel<T><<<blocks_for(n, device_), kThreads, 0, stream>>>(out.data<T>(), n, seed, offset, mean, stddev);
    LINEA_CUDA_LAUNCH_CHECK("normal", out.describe());
  });
}

}  // namespace linea::cuda
