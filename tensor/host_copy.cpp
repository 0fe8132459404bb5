#include "tensor/host_copy.h"

#include <cstring>

#include "tensor/creation.h"
#include "tensor/device_runtime.h"
#include "tensor/transfer.h"

namespace linea {

HostCopy::HostCopy(size_t capacity, Device device, Stream stream) : device_(device), capacity_(capacity) {
  if (device.is_cuda()) buffer_ = cuda_runtime().host_copy_buffer(capacity, device.index, stream == Stream::Beside);
}

HostCopy::~HostCopy() = default;

void HostCopy::start(const Tensor& t) {
  LINEA_CHECK(t.defined() && t.device() == device_, "host_copy", "expected a tensor on ", device_.str(), ", got ",
              t.defined() ? t.describe() : std::string("an undefined tensor"));
  const size_t bytes = t.numel() * dtype_size(t.dtype());
  LINEA_CHECK(bytes <= capacity_, "host_copy", t.describe(), " is ", bytes, " bytes, more than the ", capacity_,
              " this copy was made for");
  if (device_.is_cpu()) {
    started_ = copy_to(t, kCPU);
    return;
  }
  // A contiguous copy on the device is queued like any kernel; the caching allocator keeps its
  // block for the copy, which is queued after it on the same stream.
  started_ = t.is_contiguous() ? t : copy_to(t, device_);
  buffer_->start(started_.raw_data(), bytes);
}

Tensor HostCopy::wait() {
  LINEA_CHECK(started_.defined(), "host_copy", "wait() without a copy started");
  Tensor out;
  if (device_.is_cpu()) {
    out = started_;
  } else {
    const void* bytes = buffer_->wait();
    out = empty(started_.shape(), started_.dtype(), kCPU);
    std::memcpy(out.raw_data(), bytes, started_.numel() * dtype_size(started_.dtype()));
  }
  started_ = Tensor();
  return out;
}

}  // namespace linea
