#include "tensor/storage.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "tensor/device_runtime.h"
#include "tensor/error.h"

namespace linea {

namespace {
// 64-byte alignment suits AVX-512 loads and cache lines; OpenBLAS does not need more.
constexpr size_t kCpuAlignment = 64;

// Tensors of megabytes are allocated and freed many times a step. glibc serves blocks above its
// mmap threshold with fresh mappings and unmaps them on free, so every new one page-faults on
// every page again: about 10% of a 1024^3 float32 GEMM's time went to faulting in its 4 MB
// output. Blocks up to 32 MiB (glibc's maximum threshold) therefore come from the heap, and the
// heap keeps up to 512 MiB of freed memory for reuse instead of returning it at once. Set when
// the library is loaded; under the sanitizers (which bring their own allocator) it is a no-op.
const bool kHeapKeepsLargeBlocks = [] {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  return true;
}();
}  // namespace

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.is_cuda()) {
    data_ = cuda_runtime().allocate(nbytes, device.index);
    return;
  }
  const size_t rounded = (std::max<size_t>(nbytes, 1) + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  data_ = std::aligned_alloc(kCpuAlignment, rounded);
  LINEA_CHECK(data_ != nullptr, "allocate", "out of CPU memory allocating ", nbytes, " bytes");
}

Storage::~Storage() {
  if (device_.is_cuda()) cuda_runtime().release(data_, nbytes_, device_.index);
  else std::free(data_);
}

}  // namespace linea
