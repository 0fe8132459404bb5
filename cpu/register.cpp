// The CPU backend makes itself known to tensor/ when the program starts (tensor/device_runtime.h).
#include "cpu/cpu_backend.h"
#include "tensor/device_runtime.h"

namespace linea::cpu {
namespace {
const bool kRegistered = (register_cpu_backend(cpu_backend()), true);
}  // namespace
}  // namespace linea::cpu
