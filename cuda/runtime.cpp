// Devices, memory and copies on CUDA, and the backend of each device.
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "cuda/allocator.h"
#include "cuda/backend.h"
#include "cuda/check.h"
#include "cuda/cuda_backend.h"
#include "cuda/deferred_checks.h"
#include "cuda/memory.h"
#include "cuda/stream.h"

namespace linea::cuda {

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

void* allocate(size_t bytes, int device) { return CachingAllocator::instance().allocate(bytes, device); }

void release(void* ptr, size_t, int device) { CachingAllocator::instance().release(ptr, device); }

MemoryStats memory_stats(int device) { return CachingAllocator::instance().stats(device); }
void reset_peak(int device) { CachingAllocator::instance().reset_peak(device); }
void empty_cache(int device) { CachingAllocator::instance().empty_cache(device); }
size_t allocation_size(size_t bytes) { return bytes == 0 ? 0 : CachingAllocator::round_size(bytes); }

void copy_to_device(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  const cudaStream_t stream = use_device(device);
  // From pageable memory, cudaMemcpyAsync stages the host bytes before it returns, so the
  // caller may free its buffer at once; from pinned memory it would not (linea never passes it).
  LINEA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), "cuda.copy", bytes,
                   " bytes to cuda:", device);
}

void copy_to_host(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  const cudaStream_t stream = use_device(device);
  LINEA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream), "cuda.copy", bytes,
                   " bytes from cuda:", device);
  // Also where a fault of an earlier kernel surfaces: the message names this copy, see check.h.
  LINEA_CUDA_CHECK(cudaStreamSynchronize(stream), "cuda.copy", bytes, " bytes from cuda:", device);
  raise_failed_checks(device);
}

void copy_between_devices(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == src_device) {
    const cudaStream_t stream = use_device(dst_device);
    LINEA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "cuda.copy", bytes,
                     " bytes on cuda:", dst_device);
    return;
  }
  // The source must be complete before the copy reads it (it was written on its own stream), and
  // the copy complete before returning, since the caller may free the source right after.
  LINEA_CUDA_CHECK(cudaStreamSynchronize(use_device(src_device)), "cuda.copy", "cuda:", src_device);
  const cudaStream_t stream = use_device(dst_device);
  LINEA_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, stream), "cuda.copy", bytes,
                   " bytes from cuda:", src_device, " to cuda:", dst_device);
  LINEA_CUDA_CHECK(cudaStreamSynchronize(stream), "cuda.copy", "cuda:", dst_device);
  raise_failed_checks(src_device);
  raise_failed_checks(dst_device);
}

void synchronize(int device) {
  use_device(device);
  LINEA_CUDA_CHECK(cudaDeviceSynchronize(), "cuda.synchronize", "cuda:", device);
  raise_failed_checks(device);
}

const Backend& cuda_backend(int device) {
  static const std::vector<std::unique_ptr<CudaBackend>> backends = [] {
    std::vector<std::unique_ptr<CudaBackend>> all;
    for (int d = 0; d < device_count(); ++d) all.push_back(std::make_unique<CudaBackend>(d));
    return all;
  }();
  const int count = static_cast<int>(backends.size());
  LINEA_CHECK(count > 0, "cuda", "no CUDA device is visible (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides "
              "them), so ops on cuda:", device, " tensors cannot run");
  LINEA_CHECK(device >= 0 && device < count, "cuda", "device cuda:", device, " does not exist (", count,
              " GPU(s) visible)");
  return *backends[device];
}

}  // namespace linea::cuda
