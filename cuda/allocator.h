#pragma once
// The caching allocator: cudaMalloc and cudaFree are slow (each may synchronize the device), and
// a training step allocates and frees the same sizes over and over, so freed blocks are kept and
// handed out again instead of being returned to the driver.
//
// Design (PyTorch's caching allocator, simplified):
// - Sizes are rounded up to a block size: multiples of 512 B up to 1 MiB, then eight classes per
//   power of two (1, 1.125, ..., 1.875 x 2^k), so at most 12.5% is wasted and nearby sizes share
//   a class, which is what makes reuse likely.
// - Freed blocks go to their device's free list, a map from block size to blocks. A request takes
//   the smallest cached block that fits (best fit), if that block is at most 25% larger than
//   the rounded request; otherwise cudaMalloc makes a new block. Blocks are never split or
//   merged: simpler, and with size classes the waste is bounded; the cost is that cached blocks
//   of one size cannot serve another, which the out-of-memory path below makes up for.
// - Reuse needs no event: all of a device's work runs on its one stream (cuda/stream.h), so any
//   kernel still reading a freed block was queued before the next user's work and runs first.
// - Out of memory: the device's cache is returned to the driver (after syncing its stream) and
//   cudaMalloc is tried once more; if that fails too, an Error says how much was asked for, how
//   much is in use and cached, and what the device has free of its total.
// - Graph pools (cuda/graph.h): a captured CUDA graph replays into the addresses it was captured
//   with, so the blocks it used must stay its own for as long as it lives. While a pool is open
//   on a device, every allocation there is served from that pool's blocks (or the cache, or
//   cudaMalloc) and is tagged with the pool; a tagged block freed goes back to its pool, not to
//   the shared cache. When the graph is destroyed its pool retires: the free blocks join the
//   cache, and the blocks still held (the graph's outputs) join it when they are freed.
// - One mutex guards all of it (allocations are short; cudaMalloc under it is rare once warm).
// The instance is never destroyed, so storage freed during static destruction is still safe.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

#include "cuda/memory.h"

namespace linea::cuda {

class CachingAllocator {
 public:
  static CachingAllocator& instance();

  void* allocate(size_t bytes, int device);
  void release(void* ptr, int device) noexcept;  // ptr from allocate(); nullptr is ignored

  MemoryStats stats(int device);
  void reset_peak(int device);
  void empty_cache(int device);

  static size_t round_size(size_t bytes);

  // Graph pools (see above). open_pool starts routing the device's allocations into a new pool
  // and returns its id (one pool open per device at a time); close_pool stops the routing, the
  // pool keeping its blocks; retire_pool hands them back to the cache.
  int open_pool(int device);
  void close_pool(int device);
  void retire_pool(int device, int pool) noexcept;

 private:
  using FreeBlocks = std::multimap<size_t, void*>;  // cached blocks by size
  struct LiveBlock {
    size_t size;
    int pool;          // 0: the shared cache
    size_t requested;  // the request, rounded up to 512 B (MemoryStats::requested)
  };
  struct DeviceState {
    FreeBlocks free_blocks;
    std::unordered_map<void*, LiveBlock> live;
    std::map<int, FreeBlocks> pools;  // the pools not retired, with their free blocks
    int open_pool = 0;                // where allocations go now; 0: no pool
    int next_pool = 1;
    MemoryStats stats;
  };
  // A cached block of at least `size` from `blocks` wasting at most a quarter, or nullptr.
  static void* take_best_fit(FreeBlocks& blocks, size_t size, size_t* block);

  DeviceState& state(int device);  // caller holds mutex_
  // Frees every cached block of the device; caller holds mutex_ and has made it current.
  void free_cached(int device, DeviceState& s);

  std::mutex mutex_;
  std::map<int, DeviceState> devices_;
};

}  // namespace linea::cuda
