#include "tensor/backend.h"

#include "cuda/backend.h"
#include "tensor/cpu/cpu_backend.h"

namespace linea {

const Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu::cpu_backend();
  return cuda::cuda_backend(device.index);
}

}  // namespace linea
