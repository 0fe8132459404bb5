#pragma once
// Device memory and copies. With CUDA (LINEA_CUDA=ON) these go through the caching allocator and
// the device's stream; without it, every call is an Error saying that CUDA support is not built.
#include <cstddef>

namespace linea::cuda {

bool is_available();  // built with CUDA and at least one GPU present
int device_count();   // 0 without CUDA or without a GPU

void* allocate(size_t bytes, int device);
void release(void* ptr, size_t bytes, int device);

void copy_to_device(void* dst, const void* src, size_t bytes, int device);
void copy_to_host(void* dst, const void* src, size_t bytes, int device);
void copy_between_devices(void* dst, int dst_device, const void* src, int src_device, size_t bytes);

// Waits for all work queued on the device.
void synchronize(int device);

}  // namespace linea::cuda
