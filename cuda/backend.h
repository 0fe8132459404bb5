#pragma once
// The CUDA kernel set (see tensor/backend.h) of one device.
#include "tensor/backend.h"

namespace linea::cuda {

const Backend& cuda_backend(int device);

}  // namespace linea::cuda
