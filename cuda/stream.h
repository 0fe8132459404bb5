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

}  // namespace linea::cuda
