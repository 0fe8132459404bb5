#pragma once
// Reading a small result of a device without stalling it (generation's tokens, one step at a
// time). A plain copy to the host waits for everything queued on the device; a HostCopy queues
// the copy into pinned host memory behind that work, marks its end with an event and returns at
// once, so the host can queue more work before it asks for the values:
//
//   HostCopy copy(bytes, device);   // once: pinning memory is slow
//   copy.start(ids);                // queued behind the kernels that write ids
//   ... queue the next step ...
//   Tensor on_host = copy.wait();   // waits for that copy only, not for the next step
//
// By default the copy runs on the device's stream: work queued after start() waits for it, so
// that work may overwrite the tensor at once. A copy made Beside runs on a stream of its own,
// so the device's stream spends no time on it (a copy to the host holds a stream for a few
// microseconds, which a decoding step at batch 1 notices); work queued after start() then runs
// beside the copy and must leave the tensor unwritten until wait() returns.
//
// On the CPU, where work is done when the call returns, start() copies at once.
#include <cstddef>
#include <memory>

#include "tensor/tensor.h"

namespace linea {

class HostCopyBuffer;

class HostCopy {
 public:
  enum class Stream { Device, Beside };

  // Room for tensors of up to `capacity` bytes of `device`.
  HostCopy(size_t capacity, Device device, Stream stream = Stream::Device);
  ~HostCopy();
  HostCopy(const HostCopy&) = delete;
  HostCopy& operator=(const HostCopy&) = delete;

  // Queues a copy of t (on this device, at most `capacity` bytes; made contiguous when it is not).
  // A second start() before wait() replaces the first.
  void start(const Tensor& t);
  // The values of the tensor start() was given, as a new CPU tensor of its shape and dtype; waits
  // for that copy. An Error when nothing was started.
  Tensor wait();

 private:
  Device device_;
  size_t capacity_;
  std::unique_ptr<HostCopyBuffer> buffer_;  // CUDA only
  Tensor started_;  // what start() was given (its shape and dtype; on the CPU, its copy)
};

}  // namespace linea
