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
struct Uniform {
  double low, high;
  template <class T>
  __device__ T at(uint64_t seed, uint64_t counter) const {
    // uniform() is in (0, 1]; 1 - u is in [0, 1). Rounding to T can land on high: step back.
    const double u = 1.0 - philox::uniform(seed, counter);
    T v = static_cast<T>(__dadd_rn(low, __dmul_rn(high - low, u)));
    if (v >= static_cast<T>(high) && high > low) v = nextafter(static_cast<T>(high), static_cast<T>(low));
    return v;
  }
};

struct Normal {
  double mean, stddev;
  template <class T>
  __device__ T at(uint64_t seed, uint64_t counter) const {
    return static_cast<T>(__dadd_rn(mean, __dmul_rn(stddev, philox::normal(seed, counter))));
  }
};

template <class T, class Draw>
__global__ void fill_kernel(T* out, int64_t n, uint64_t seed, uint64_t offset, Draw draw) {
  LINEA_GRID_STRIDE_LOOP(i, n) out[i] = draw.template at<T>(seed, offset + static_cast<uint64_t>(i));
}

// Fills out (contiguous) with draw's numbers at counters offset, offset + 1, ...
template <class Draw>
void fill_random(const Tensor& out, int device, uint64_t seed, uint64_t offset, Draw draw, const char* op) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_floating(out.dtype(), op, [&]<class T>() {
    const cudaStream_t stream = use_device(device);
    fill_kernel<T><<<blocks_for(n, device), kThreads, 0, stream>>>(out.data<T>(), n, seed, offset, draw);
    LINEA_CUDA_LAUNCH_CHECK(op, out.describe());
  });
}

}  // namespace

void CudaBackend::uniform(const Tensor& out, uint64_t seed, uint64_t offset, double low, double high) const {
  fill_random(out, device_, seed, offset, Uniform{low, high}, "uniform");
}

void CudaBackend::normal(const Tensor& out, uint64_t seed, uint64_t offset, double mean, double stddev) const {
  fill_random(out, device_, seed, offset, Normal{mean, stddev}, "normal");
}

}  // namespace linea::cuda
