// Devices, memory and copies on CUDA.
#include <cuda_runtime.h>

#include "cuda/backend.h"
#include "cuda/check.h"
#include "cuda/memory.h"

namespace linea::cuda {

namespace {

// Makes `device` current for the calls that follow on this thread.
void use_device(int device) {
  const int count = device_count();
  LINEA_CHECK(device >= 0 && device < count, "cuda", "device cuda:", device, " does not exist (",
              count, " GPU(s) visible)");
  LINEA_CUDA_CHECK(cudaSetDevice(device), "cuda");
}

}  // namespace

int device_count() {
  int count = 0;
  // No driver or no GPU: report none rather than failing, so CPU-only machines work.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

bool is_available() { return device_count() > 0; }

void* allocate(size_t bytes, int device) {
  use_device(device);
  void* ptr = nullptr;
  if (bytes == 0) return nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    fail("cuda.allocate", "out of GPU memory on cuda:", device, ": asked for ", bytes, " bytes, ",
         free_bytes, " of ", total_bytes, " bytes free (", cudaGetErrorString(status), ")");
  }
  return ptr;
}

void release(void* ptr, size_t, int device) {
  if (ptr == nullptr) return;
  cudaSetDevice(device);
  cudaFree(ptr);  // a destructor must not throw; a failed free leaks rather than aborts
}

void copy_to_device(void* dst, const void* src, size_t bytes, int device) {
  use_device(device);
  LINEA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cuda.copy", "(", bytes, " bytes to cuda:", device, ")");
}

void copy_to_host(void* dst, const void* src, size_t bytes, int device) {
  use_device(device);
  LINEA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cuda.copy", "(", bytes, " bytes from cuda:", device, ")");
}

void copy_between_devices(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  use_device(dst_device);
  LINEA_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device, src, src_device, bytes), "cuda.copy");
}

void synchronize(int device) {
  use_device(device);
  LINEA_CUDA_CHECK(cudaDeviceSynchronize(), "cuda.synchronize");
}

const Backend& cuda_backend(int device) {
  use_device(device);
  fail("cuda", "op kernels for CUDA tensors are not built yet: CUDA tensors can be created, copied "
       "and moved, and ops on them arrive with the CUDA backend");
}

}  // namespace linea::cuda
