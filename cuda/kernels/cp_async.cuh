#pragma once
// Asynchronous copies from global to shared memory (cp.async, sm_80 and newer): a thread issues
// 16-byte copies that bypass its registers and goes on computing; it waits for them in groups.
// The chunked scan (chunked_scan_kernels.cuh) and the bfloat16 attention kernels
// (attention_tf32.cu) fetch their next tile this way while they multiply the current one.
namespace linea::cuda {

// 16 bytes from global to shared memory without going through registers (sm_80 and newer), the
// bytes past `bytes` zero-filled; a plain copy on older GPUs. cp_async_wait_all waits for this
// thread's copies; a __syncthreads after it makes every thread's visible.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(bytes));
#else
  *static_cast<float4*>(smem) = bytes > 0 ? *static_cast<const float4*>(gmem) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}
// Copies can be waited for in groups: cp_async_commit closes a group of this thread's copies, and
// cp_async_wait_all_but_last waits for every group but the last one committed.
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
__device__ __forceinline__ void cp_async_wait_all_but_last() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 1;" ::: "memory");
#endif
}

}  // namespace linea::cuda
