#include "tensor/backend.h"

#include <atomic>

#include "tensor/device_runtime.h"
#include "tensor/error.h"

namespace linea {

namespace {
// Set by static initializers before main() and read afterwards; atomics so that a read from
// another thread needs no further ordering.
std::atomic<const Backend*> g_cpu_backend{nullptr};
std::atomic<const DeviceRuntime*> g_cuda_runtime{nullptr};
}  // namespace

void register_cpu_backend(const Backend& backend) { g_cpu_backend.store(&backend); }
void register_cuda_runtime(const DeviceRuntime& runtime) { g_cuda_runtime.store(&runtime); }

const DeviceRuntime& cuda_runtime() {
  const DeviceRuntime* runtime = g_cuda_runtime.load();
  LINEA_CHECK(runtime != nullptr, "cuda", "no CUDA runtime is linked into this program (link linea::linea, or "
              "linea_cuda whole, see CMakeLists.txt)");
  return *runtime;
}

const Backend& backend_for(Device device) {
  if (device.is_cuda()) return cuda_runtime().backend(device.index);
  const Backend* cpu = g_cpu_backend.load();
  LINEA_CHECK(cpu != nullptr, "cpu", "no CPU backend is linked into this program (link linea::linea, or linea_cpu "
              "whole, see CMakeLists.txt)");
  return *cpu;
}

}  // namespace linea
