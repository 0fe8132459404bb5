#include "cuda/host_copy.h"

#include <cuda_runtime.h>

#include "cuda/check.h"
#include "cuda/stream.h"

namespace linea::cuda {

namespace {

class PinnedHostCopy final : public HostCopyBuffer {
 public:
  PinnedHostCopy(size_t bytes, int device, bool beside) : bytes_(bytes > 0 ? bytes : 1), device_(device) {
    use_device(device);
    LINEA_CUDA_CHECK(cudaHostAlloc(&host_, bytes_, cudaHostAllocDefault), "host_copy", bytes_, " pinned bytes");
    try {
      make_event(&copied_);
      if (beside) {
        make_event(&ready_);
        LINEA_CUDA_CHECK(cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking), "host_copy",
                         "a copy stream on cuda:", device);
      }
    } catch (...) {
      release();
      throw;
    }
  }

  // Never throws: a copy still in flight is waited for (it writes into host_), errors ignored.
  ~PinnedHostCopy() override {
    cudaSetDevice(device_);
    if (started_) cudaEventSynchronize(copied_);
    release();
    cudaGetLastError();
  }

  void start(const void* src, size_t bytes) override {
    LINEA_CHECK(bytes <= bytes_, "host_copy", bytes, " bytes do not fit a buffer of ", bytes_);
    const cudaStream_t stream = use_device(device_);
    cudaStream_t copy_stream = stream;
    if (own_stream_) {  // behind the work queued so far, beside what comes after
      LINEA_CUDA_CHECK(cudaEventRecord(ready_, stream), "host_copy", "cuda:", device_);
      LINEA_CUDA_CHECK(cudaStreamWaitEvent(own_stream_, ready_, 0), "host_copy", "cuda:", device_);
      copy_stream = own_stream_;
    }
    // A copy still in flight into host_ is ordered before this one on the same stream.
    LINEA_CUDA_CHECK(cudaMemcpyAsync(host_, src, bytes, cudaMemcpyDeviceToHost, copy_stream), "host_copy", bytes,
                     " bytes from cuda:", device_);
    LINEA_CUDA_CHECK(cudaEventRecord(copied_, copy_stream), "host_copy", "cuda:", device_);
    started_ = true;
  }

  const void* wait() override {
    use_device(device_);
    // Also where a fault of an earlier kernel on the stream surfaces (cuda/check.h).
    LINEA_CUDA_CHECK(cudaEventSynchronize(copied_), "host_copy", "waiting for a copy from cuda:", device_);
    started_ = false;
    return host_;
  }

 private:
  void make_event(cudaEvent_t* event) {
    LINEA_CUDA_CHECK(cudaEventCreateWithFlags(event, cudaEventDisableTiming), "host_copy", "an event on cuda:",
                     device_);
  }

  // What the constructor made; never throws.
  void release() {
    if (own_stream_) cudaStreamDestroy(own_stream_);
    if (ready_) cudaEventDestroy(ready_);
    if (copied_) cudaEventDestroy(copied_);
    cudaFreeHost(host_);
  }

  size_t bytes_;
  int device_;
  void* host_ = nullptr;
  cudaEvent_t copied_ = nullptr;       // recorded after the last copy
  cudaEvent_t ready_ = nullptr;        // beside: the device stream's work before the copy
  cudaStream_t own_stream_ = nullptr;  // beside: where the copies run
  bool started_ = false;
};

}  // namespace

std::unique_ptr<HostCopyBuffer> make_host_copy_buffer(size_t bytes, int device, bool beside) {
  return std::make_unique<PinnedHostCopy>(bytes, device, beside);
}

}  // namespace linea::cuda
