#include "tensor/storage.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "cuda/memory.h"
#include "tensor/error.h"

namespace linea {

namespace {
// 64-byte alignment suits AVX-512 loads and cache lines; OpenBLAS does not need more.
constexpr size_t kCpuAlignment = 64;
}  // namespace

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device.is_cuda()) {
    data_ = cuda::allocate(nbytes, device.index);
    return;
  }
  const size_t rounded = (std::max<size_t>(nbytes, 1) + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  data_ = std::aligned_alloc(kCpuAlignment, rounded);
  LINEA_CHECK(data_ != nullptr, "allocate", "out of CPU memory allocating ", nbytes, " bytes");
}

Storage::~Storage() {
  if (device_.is_cuda()) cuda::release(data_, nbytes_, device_.index);
  else std::free(data_);
}

}  // namespace linea
