#pragma once
// Moving data between devices and layouts, without autograd (autograd/ops.h wraps these).
#include "tensor/tensor.h"

namespace linea {

// A contiguous copy of t on `device` (always a new tensor, even on the same device).
Tensor copy_to(const Tensor& t, Device device);

// Writes src into dst elementwise (src broadcast to dst's shape; dtypes converted); the two may
// live on different devices. dst may be any view. Bumps dst's version.
void copy_into(const Tensor& dst, const Tensor& src);

// src viewed with dst's shape through stride-0 broadcast dims (no copy); error naming op if the
// shapes do not broadcast.
Tensor broadcast_view(const Tensor& src, const Shape& shape, const char* op);

}  // namespace linea
