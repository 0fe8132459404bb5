#pragma once
// How tensor/ reaches the backends without naming them. The layers below a backend (this folder)
// cannot include it: instead each backend registers itself here when the program starts
// (cpu/register.cpp, cuda/register.cpp), and backend_for(), Storage and the copies between
// devices look it up. A program linked without a GPU runtime gets an Error naming what is
// missing the first time it asks for a CUDA device.
#include <cstddef>
#include <functional>
#include <memory>

namespace linea {

class Backend;

// GPU work recorded once and replayed: every replay runs the kernels, with the same arguments and
// the same memory, that the recorded work queued (cuda/graph.h).
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  virtual void replay() const = 0;
  // The operations recorded (kernels, copies, memsets): what one replay launches.
  virtual size_t node_count() const = 0;
};

// Pinned host memory and an event of one device: device-to-host copies that do not stall it
// (tensor/host_copy.h says how to use them). Made once and reused, since pinning memory is slow.
class HostCopyBuffer {
 public:
  virtual ~HostCopyBuffer() = default;  // waits for a copy still in flight
  // Queues a copy of `bytes` (at most the buffer's size) from device memory behind the work
  // already queued on the device's stream, and marks its end; returns at once. A buffer made
  // `beside` copies on a stream of its own, which later work on the device's stream does not wait for.
  virtual void start(const void* src, size_t bytes) = 0;
  // Waits for the copy start() queued last (not for the work queued after it); returns the bytes.
  virtual const void* wait() = 0;
};

// What tensor/ needs from a GPU runtime besides its kernels: memory and copies (see
// cuda/memory.h for what each does).
class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual const Backend& backend(int device) const = 0;
  virtual void* allocate(size_t bytes, int device) const = 0;
  virtual void release(void* ptr, size_t bytes, int device) const = 0;  // never throws
  virtual void copy_to_device(void* dst, const void* src, size_t bytes, int device) const = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes, int device) const = 0;
  virtual void copy_between_devices(void* dst, int dst_device, const void* src, int src_device,
                                    size_t bytes) const = 0;
  // Runs `work` recording what it queues on the device instead of running it (cuda/graph.h).
  virtual std::unique_ptr<DeviceGraph> capture(int device, const std::function<void()>& work) const = 0;
  virtual std::unique_ptr<HostCopyBuffer> host_copy_buffer(size_t bytes, int device, bool beside) const = 0;
};

// Called once per backend at start-up, from a static initializer of the backend's library (which
// is linked whole, so the initializer is kept: CMakeLists.txt). The objects must live for the
// whole program.
void register_cpu_backend(const Backend& backend);
void register_cuda_runtime(const DeviceRuntime& runtime);

// The registered GPU runtime; an Error when none is linked.
const DeviceRuntime& cuda_runtime();

}  // namespace linea
