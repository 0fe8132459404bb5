#pragma once
// One stream per device. Every kernel, cuBLAS call and copy of linea runs on its device's stream,
// so work on one device is ordered without events, and the caching allocator may hand a freed
// block to the next op at once: whatever still reads it was queued before, on the same stream.
#include <cuda_runtime.h>

namespace linea::cuda {

// The stream of `device`, created on first use (it lives as long as the process).
cudaStream_t stream_for(int device);

// Makes `device` current on this thread (an Error if it does not exist) and returns its stream:
// the first line of every kernel entry point, so that several GPUs can be driven from one thread.
cudaStream_t use_device(int device);

// Multiprocessors on `device` (cached), for sizing grids.
int sm_count(int device);

// Whether kernels on `device` may be launched to overlap the one before them (cuda/launch.cuh:
// launch_overlapped): sm_90 and newer, unless LINEA_OVERLAP_LAUNCHES=0.
bool overlaps_launches(int device);
// Whether `kernel` may be launched so on `device`: the device overlaps launches and the kernel's
// code for it is sm_90 or newer, so that it executes wait_for_prior_kernels() (cuda/launch.cuh).
// Cached per kernel and device.
bool kernel_overlaps(const void* kernel, int device);

}  // namespace linea::cuda
