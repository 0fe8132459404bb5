#include "cuda/host_copy.h"

#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/stream.h"

namespace linea::cuda {

namespace {

class PinnedHostCopy final : public HostCopyBuffer {
 public:
  PinnedHostCopy(size_t bytes, int device) : bytes_(bytes > 0 ? bytes : 1), device_(device) {
    use_device(device);
    LINEA_CUDA_CHECK(cudaHostAlloc(&host_, bytes_, cudaHostAllocDefault), "host_copy", bytes_, " pinned bytes");
    const cudaError_t made = cudaEventCreateWithFlags(&event_, cudaEventDisableTiming);
    if (made != cudaSuccess) {
      cudaFreeHost(host_);
      LINEA_CUDA_CHECK(made, "host_copy", "an event on cuda:", device);
    }
  }

  // Never throws: a copy still in flight is waited for (it writes into host_), errors ignored.
  ~PinnedHostCopy() override {
    cudaSetDevice(device_);
    if (started_) cudaEventSynchronize(event_);
    cudaEventDestroy(event_);
    cudaFreeHost(host_);
    cudaGetLastError();
  }

  void start(const void* src, size_t bytes) override {
    LINEA_CHECK(bytes <= bytes_, "host_copy", bytes, " bytes do not fit a buffer of ", bytes_);
    const cudaStream_t stream = use_device(device_);
    // A copy still in flight into host_ is ordered before this one on the same stream.
    LINEA_CUDA_CHECK(cudaMemcpyAsync(host_, src, bytes, cudaMemcpyDeviceToHost, stream), "host_copy", bytes,
                     " bytes from cuda:", device_);
    LINEA_CUDA_CHECK(cudaEventRecord(event_, stream), "host_copy", "cuda:", device_);
    started_ = true;
  }

  const void* wait() override {
    use_device(device_);
    // Also where a fault of an earlier kernel on the stream surfaces (cuda/check.h).
    LINEA_CUDA_CHECK(cudaEventSynchronize(event_), "host_copy", "waiting for a copy from cuda:", device_);
    started_ = false;
    return host_;
  }

 private:
  size_t bytes_;
  int device_;
  void* host_ = nullptr;
  cudaEvent_t event_ = nullptr;
  bool started_ = false;
};

}  // namespace

std::unique_ptr<HostCopyBuffer> make_host_copy_buffer(size_t bytes, int device) {
  return std::make_unique<PinnedHostCopy>(bytes, device);
}

}  // namespace linea::cuda
