#include "tensor/transfer.h"

#include <cstring>

#include "tensor/backend.h"
#include "tensor/device_runtime.h"

namespace linea {

Tensor broadcast_view(const Tensor& src, const Shape& shape, const char* op) {
  LINEA_CHECK(src.dim() <= static_cast<int64_t>(shape.size()), op, "cannot broadcast ", src.describe(),
              " to shape ", shape_str(shape));
  const size_t lead = shape.size() - src.shape().size();
  Shape strides(shape.size(), 0);
  for (size_t d = 0; d < src.shape().size(); ++d) {
    const int64_t from = src.shape()[d], to = shape[lead + d];
    LINEA_CHECK(from == to || from == 1, op, "cannot broadcast ", src.describe(), " to shape ", shape_str(shape));
    strides[lead + d] = from == 1 ? 0 : src.strides()[d];
  }
  return make_view(src, shape, strides, src.offset());
}

namespace {

// Copies the bytes of contiguous src into contiguous dst across devices.
void copy_bytes(const Tensor& dst, const Tensor& src) {
  const size_t bytes = src.numel() * dtype_size(src.dtype());
  if (bytes == 0) return;
  if (src.device().is_cpu() && dst.device().is_cpu()) std::memcpy(dst.raw_data(), src.raw_data(), bytes);
  else if (dst.device().is_cuda() && src.device().is_cpu())
    cuda_runtime().copy_to_device(dst.raw_data(), src.raw_data(), bytes, dst.device().index);
  else if (dst.device().is_cpu())
    cuda_runtime().copy_to_host(dst.raw_data(), src.raw_data(), bytes, src.device().index);
  else
    cuda_runtime().copy_between_devices(dst.raw_data(), dst.device().index, src.raw_data(), src.device().index,
                                        bytes);
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  const Tensor from = broadcast_view(src, dst.shape(), "copy");
  if (from.device() == dst.device()) {
    backend_for(dst).copy(from, dst);
  } else {
    // Across devices: make src contiguous in dst's dtype on its own device, move the bytes, then
    // scatter them into dst's layout on dst's device.
    Tensor staged = empty(dst.shape(), dst.dtype(), from.device());
    backend_for(from).copy(from, staged);
    Tensor landed = dst.is_contiguous() ? dst : empty(dst.shape(), dst.dtype(), dst.device());
    copy_bytes(landed, staged);
    if (!landed.is_same(dst)) backend_for(dst).copy(landed, dst);
  }
  dst.bump_version();
}

Tensor copy_to(const Tensor& t, Device device) {
  Tensor out = empty(t.shape(), t.dtype(), device);
  copy_into(out, t);
  return out;
}

}  // namespace linea
