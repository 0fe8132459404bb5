#pragma once
// Scratch device memory for a kernel's partial results, from the caching allocator and handed
// back when the object goes out of scope. Giving it back while kernels that use it are still
// queued is safe: the next user of the block queues its work behind them on the same stream.
#include <cstddef>

#include "cuda/memory.h"

namespace linea::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer(size_t bytes, int device) : ptr_(allocate(bytes, device)), bytes_(bytes), device_(device) {}
  ~DeviceBuffer() { release(ptr_, bytes_, device_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <class T> T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_;
  size_t bytes_;
  int device_;
};

}  // namespace linea::cuda
