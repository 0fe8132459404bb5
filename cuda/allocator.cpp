// The caching allocator (design in cuda/allocator.h).
#include "cuda/allocator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "cuda/check.h"
#include "cuda/stream.h"

namespace linea::cuda {

namespace {

constexpr size_t kSmallStep = 512;          // sizes up to kLarge round to multiples of this
constexpr size_t kLarge = size_t(1) << 20;  // 1 MiB
constexpr int kClassesPerDoubling = 8;      // above kLarge: 2^k * (1 + j/8)

// "3.2 GiB" next to the exact byte counts in error messages.
std::string human(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) v /= 1024.0, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace

CachingAllocator& CachingAllocator::instance() {
  static CachingAllocator* allocator = new CachingAllocator;  // never destroyed: see the header
  return *allocator;
}

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes <= kLarge) return std::max<size_t>(1, (bytes + kSmallStep - 1) / kSmallStep) * kSmallStep;
  if (bytes > (size_t(1) << 62)) return bytes;  // no class can hold it; cudaMalloc will refuse
  const int log2 = 63 - __builtin_clzll(bytes);
  const size_t step = size_t(1) << (log2 - 3);  // eight classes per doubling (kClassesPerDoubling)
  static_assert(kClassesPerDoubling == 8);
  return (bytes + step - 1) / step * step;
}

CachingAllocator::DeviceState& CachingAllocator::state(int device) { return devices_[device]; }

void CachingAllocator::free_cached(int device, DeviceState& s) {
  if (s.free_blocks.empty()) return;
  // A cached block may still be read by queued kernels (it was freed on the host side only).
  cudaStreamSynchronize(stream_for(device));
  for (const auto& [size, ptr] : s.free_blocks) {
    cudaFree(ptr);
    s.stats.reserved -= size;
    s.stats.cached -= size;  // (graph pools' free blocks stay theirs, and cached)
  }
  cudaGetLastError();  // a failed free leaks rather than poisons the next call
  s.free_blocks.clear();
}

void* CachingAllocator::take_best_fit(FreeBlocks& blocks, size_t size, size_t* block) {
  const auto it = blocks.lower_bound(size);
  if (it == blocks.end() || it->first > size + size / 4) return nullptr;
  *block = it->first;
  void* ptr = it->second;
  blocks.erase(it);
  return ptr;
}

void* CachingAllocator::allocate(size_t bytes, int device) {
  use_device(device);  // checks the device and makes it current for cudaMalloc
  if (bytes == 0) return nullptr;
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceState& s = state(device);

  size_t block = size;
  // Best fit among cached blocks, if it wastes at most a quarter of the request: first those of
  // the open graph pool, then the shared cache (a block taken from there joins the pool).
  void* ptr = s.open_pool != 0 ? take_best_fit(s.pools[s.open_pool], size, &block) : nullptr;
  if (ptr == nullptr) ptr = take_best_fit(s.free_blocks, size, &block);
  if (ptr != nullptr) {
    s.stats.cached -= block;
  } else {
    block = size;
    cudaError_t status = cudaMalloc(&ptr, size);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      free_cached(device, s);  // blocks of other sizes may be what stands in the way
      status = cudaMalloc(&ptr, size);
    }
    if (status != cudaSuccess) {
      cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      cudaGetLastError();
      fail("cuda.allocate", "out of GPU memory on cuda:", device, ": asked for ", bytes, " bytes (",
           human(bytes), "); linea holds ", s.stats.in_use, " bytes (", human(s.stats.in_use),
           ") in use and ", s.stats.cached, " cached; the device has ", free_bytes, " (", human(free_bytes),
           ") of ", total_bytes, " (", human(total_bytes), ") bytes free (cudaMalloc: ",
           cudaGetErrorString(status), ")");
    }
    ++s.stats.device_mallocs;
    s.stats.reserved += size;
  }
  const size_t requested = (bytes + kSmallStep - 1) / kSmallStep * kSmallStep;
  s.live.emplace(ptr, LiveBlock{block, s.open_pool, requested});
  s.stats.in_use += block;
  s.stats.peak = std::max(s.stats.peak, s.stats.in_use);
  s.stats.requested += requested;
  s.stats.peak_requested = std::max(s.stats.peak_requested, s.stats.requested);
  ++s.stats.allocations;
  return ptr;
}

void CachingAllocator::release(void* ptr, int device) noexcept {
  if (ptr == nullptr) return;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceState& s = state(device);
    const auto it = s.live.find(ptr);
    if (it == s.live.end()) return;  // not ours: nothing sensible to do in a destructor
    const auto [block, pool, requested] = it->second;
    s.live.erase(it);
    s.stats.in_use -= block;
    s.stats.requested -= requested;
    const auto owner = s.pools.find(pool);  // a retired pool's blocks go to the shared cache
    (owner != s.pools.end() ? owner->second : s.free_blocks).emplace(block, ptr);
    s.stats.cached += block;
  } catch (...) {
    // Out of host memory for the free list: the block leaks, the program goes on.
  }
}

int CachingAllocator::open_pool(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceState& s = state(device);
  LINEA_CHECK(s.open_pool == 0, "cuda.graph", "a graph is already being captured on cuda:", device,
              "; captures on one device cannot nest");
  s.open_pool = s.next_pool++;
  s.pools[s.open_pool];
  return s.open_pool;
}

void CachingAllocator::close_pool(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  state(device).open_pool = 0;
}

void CachingAllocator::retire_pool(int device, int pool) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceState& s = state(device);
    if (s.open_pool == pool) s.open_pool = 0;
    const auto it = s.pools.find(pool);
    if (it == s.pools.end()) return;
    s.free_blocks.merge(it->second);
    s.pools.erase(it);
  } catch (...) {
    // Out of host memory for the map's nodes: the pool's blocks stay with it, unused.
  }
}

MemoryStats CachingAllocator::stats(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = devices_.find(device);
  return it == devices_.end() ? MemoryStats{} : it->second.stats;
}

void CachingAllocator::reset_peak(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceState& s = state(device);
  s.stats.peak = s.stats.in_use;
  s.stats.peak_requested = s.stats.requested;
}

void CachingAllocator::empty_cache(int device) {
  use_device(device);
  std::lock_guard<std::mutex> lock(mutex_);
  free_cached(device, state(device));
}

}  // namespace linea::cuda
