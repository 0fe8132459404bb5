// Built instead of the CUDA sources when LINEA_CUDA is OFF: the device dimension still exists,
// and asking for a CUDA device is a clear error rather than a link failure. Queries report an
// empty device; the TF32 and scan state switches are kept so that code setting them runs unchanged.
#include <atomic>

#include "cuda/backend.h"
#include "cuda/graph.h"
#include "cuda/host_copy.h"
#include "cuda/memory.h"

namespace linea::cuda {

namespace {
[[noreturn]] void not_built(const char* op) {
  fail(op, "linea was built without CUDA support; reconfigure with -DLINEA_CUDA=ON on a machine with nvcc");
}
std::atomic<bool> g_tf32{true};
std::atomic<ScanStatePass> g_scan_state_pass{ScanStatePass::kAuto};
}  // namespace

bool is_available() { return false; }
int device_count() { return 0; }
void* allocate(size_t, int) { not_built("cuda.allocate"); }
void release(void*, size_t, int) {}
void copy_to_device(void*, const void*, size_t, int) { not_built("cuda.copy"); }
void copy_to_host(void*, const void*, size_t, int) { not_built("cuda.copy"); }
void copy_between_devices(void*, int, const void*, int, size_t) { not_built("cuda.copy"); }
void synchronize(int) {}
std::unique_ptr<DeviceGraph> capture_graph(int, const std::function<void()>&) { not_built("cuda.graph"); }
MemoryStats memory_stats(int) { return {}; }
void reset_peak(int) {}
void empty_cache(int) {}
size_t allocation_size(size_t bytes) { return bytes; }
const Backend& cuda_backend(int) { not_built("cuda"); }
std::unique_ptr<HostCopyBuffer> make_host_copy_buffer(size_t, int, bool) { not_built("host_copy"); }
void set_tf32(bool enabled) { g_tf32.store(enabled); }
bool tf32_enabled() { return g_tf32.load(); }
void set_scan_state_pass(ScanStatePass pass) { g_scan_state_pass.store(pass); }
ScanStatePass scan_state_pass() { return g_scan_state_pass.load(); }
void set_scan_persistent_blocks(int) {}
int scan_persistent_blocks() { return 0; }

}  // namespace linea::cuda
