// The CUDA runtime makes itself known to tensor/ when the program starts (tensor/device_runtime.h).
// Built with and without CUDA: without it, cuda/no_cuda.cpp answers every call with an Error
// saying that CUDA support is not built.
#include "cuda/backend.h"
#include "cuda/graph.h"
#include "cuda/host_copy.h"
#include "cuda/memory.h"
#include "tensor/device_runtime.h"

namespace linea::cuda {
namespace {

class Runtime final : public DeviceRuntime {
 public:
  const Backend& backend(int device) const override { return cuda_backend(device); }
  void* allocate(size_t bytes, int device) const override { return cuda::allocate(bytes, device); }
  void release(void* ptr, size_t bytes, int device) const override { cuda::release(ptr, bytes, device); }
  void copy_to_device(void* dst, const void* src, size_t bytes, int device) const override {
    cuda::copy_to_device(dst, src, bytes, device);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes, int device) const override {
    cuda::copy_to_host(dst, src, bytes, device);
  }
  void copy_between_devices(void* dst, int dst_device, const void* src, int src_device,
                            size_t bytes) const override {
    cuda::copy_between_devices(dst, dst_device, src, src_device, bytes);
  }
  std::unique_ptr<DeviceGraph> capture(int device, const std::function<void()>& work) const override {
    return cuda::capture_graph(device, work);
  }
  std::unique_ptr<HostCopyBuffer> host_copy_buffer(size_t bytes, int device, bool beside) const override {
    return make_host_copy_buffer(bytes, device, beside);
  }
};

const Runtime kRuntime;
const bool kRegistered = (register_cuda_runtime(kRuntime), true);

}  // namespace
}  // namespace linea::cuda
