#pragma once
// CUDA graphs: work recorded once, replayed for the cost of one launch.
//
// A decode step is a few hundred small kernels, each of which costs the host some microseconds
// to queue; the GPU finishes them faster than the host can queue them. Captured into a graph,
// the step is queued with one call (cudaGraphLaunch) and the GPU runs it back to back.
//
// capture_graph(device, work) runs `work` with the device's stream in capture mode: the kernels,
// cuBLAS calls and device-to-device copies it queues are recorded, not run. What a graph needs
// from the code it records:
// - Memory. A replay writes and reads the addresses the capture saw, so during the capture the
//   device's allocations come from a graph pool (cuda/allocator.h) that stays the graph's until
//   it is destroyed; tensors created before the capture and read by it (its inputs) must be kept
//   alive and unmoved by the caller, who also refreshes them in place between replays.
// - No host round trip. A copy to or from host memory, or a synchronization, inside `work` is
//   refused by CUDA; capture_graph then ends the capture and throws an Error naming the failure
//   (so a caller can fall back to running the work eagerly).
// - No host-side decisions that change between replays: the recorded kernels are replayed as
//   they were, whatever values the host would have computed since.
// The capture uses cudaStreamCaptureModeRelaxed so that the allocator may still cudaMalloc.
#include <functional>
#include <memory>

#include "tensor/device_runtime.h"

namespace linea::cuda {

std::unique_ptr<DeviceGraph> capture_graph(int device, const std::function<void()>& work);

}  // namespace linea::cuda
