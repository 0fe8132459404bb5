#pragma once
// Device memory and copies. With CUDA (LINEA_CUDA=ON) these go through the caching allocator
// (cuda/allocator.h) and the device's stream (cuda/stream.h); without it, allocating or copying
// is an Error saying that CUDA support is not built, and the queries report nothing.
// This header is seen by CPU-only code, so it names no CUDA type.
#include <cstddef>
#include <cstdint>

namespace linea::cuda {

bool is_available();  // built with CUDA and at least one GPU present
int device_count();   // 0 without CUDA or without a GPU

// A block of at least `bytes` on `device` from the caching allocator (nullptr for 0 bytes); out
// of memory is an Error with the sizes. release() hands it back for reuse and never throws.
void* allocate(size_t bytes, int device);
void release(void* ptr, size_t bytes, int device);

// Copies on the device's stream. copy_to_host returns once the bytes are on the host;
// copy_to_device returns once the host buffer has been read (it may then be reused or freed),
// possibly before the bytes land, which later work on the stream waits for.
void copy_to_device(void* dst, const void* src, size_t bytes, int device);
void copy_to_host(void* dst, const void* src, size_t bytes, int device);
void copy_between_devices(void* dst, int dst_device, const void* src, int src_device, size_t bytes);

// Waits for all work queued on the device.
void synchronize(int device);

// What the caching allocator holds on a device, in bytes.
struct MemoryStats {
  size_t in_use = 0;         // blocks held by live storage (sizes rounded up to the block size)
  size_t peak = 0;           // the highest in_use since the start or reset_peak()
  // What live storage asked for, each request rounded up to 512 B: without the block rounding
  // and the best-fit waste in in_use, and so the figure PyTorch's max_memory_allocated reports
  // (tools/gpu/anchor.py), for like-for-like peaks.
  size_t requested = 0;
  size_t peak_requested = 0;  // the highest requested since the start or reset_peak()
  size_t cached = 0;         // freed blocks kept for reuse, not returned to the driver
  size_t reserved = 0;       // in_use + cached: what cudaMalloc has handed out
  int64_t allocations = 0;   // allocate() calls served
  int64_t device_mallocs = 0;  // of those, the ones that needed a new cudaMalloc
};
MemoryStats memory_stats(int device);
void reset_peak(int device);
// Returns every cached block to the driver (after waiting for the device's stream).
void empty_cache(int device);
// The block size allocate(bytes) hands out (its rounding rule; see cuda/allocator.h).
size_t allocation_size(size_t bytes);

}  // namespace linea::cuda
