#pragma once
// Device-to-host copies that do not stall the device (tensor/host_copy.h uses them through the
// runtime, tensor/device_runtime.h): a pinned host buffer, where a copy can land while the stream
// runs on, and an event recorded after the copy, which the host waits for instead of the stream;
// `beside`, the copy itself runs on a stream of the buffer's own, after an event on the device's
// stream, so that stream goes on at once.
// Names no CUDA type: without CUDA (no_cuda.cpp) making one is an Error.
#include <cstddef>
#include <memory>

#include "tensor/device_runtime.h"

namespace linea::cuda {

// A buffer of `bytes` (at least 1) pinned for `device`, with its event (and, beside, its stream).
std::unique_ptr<HostCopyBuffer> make_host_copy_buffer(size_t bytes, int device, bool beside);

}  // namespace linea::cuda
