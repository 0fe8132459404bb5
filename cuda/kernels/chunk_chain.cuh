#pragma once
// A value handed from block to block in a fixed order within one launch: how the chunked scan's
// per-chunk kernels (chunked_scan_kernels.cuh) carry the state from one chunk to the next without
// a kernel of their own for it.
//
// Every chunk's block does most of its work in parallel with the others: it loads its chunk, sums
// its decays, and computes the products inside the chunk and its own update of the state. Only the
// state's passage is sequential: the block of chunk n waits until the block of chunk n - 1 has
// written the state after chunk n - 1, computes the state after its own chunk from it (elementwise:
// the decay times that state plus the chunk's update), writes it and says so (`publish`), then goes
// on with its chunk. CUB's single-pass prefix scan passes its partial sums between blocks the same
// way.
//
// Waiting for another block is safe only while that block is sure to run: blocks are not started
// in the order of blockIdx, nor all at once. So a block does not take its chunk from blockIdx but
// from a counter (`take_ticket`): the n-th block to start gets ticket n, the chunks are numbered
// so that the one a block waits for has a smaller ticket, and a block with a smaller ticket has
// already started, and itself waits only for smaller tickets. No block can wait for one that is
// not running, so none waits forever.
//
// A block reads what another block wrote after its wait with loads that go to L2 (__ldcg): the
// SM's L1 is not kept coherent with other SMs' writes.
namespace linea::cuda {

// The counters of one launch, zero before it (cudaMemsetAsync).
struct ChunkChain {
  unsigned* tickets;  // the next ticket to hand out
  int* published;     // per chain (a sequence of chunks): how many of its chunks have written theirs
};

__device__ __forceinline__ int load_acquire(const int* p) {
  int v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
#else
  v = *static_cast<const volatile int*>(p);
  __threadfence();
#endif
  return v;
}

__device__ __forceinline__ void store_release(int* p, int v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
  __threadfence();
  *static_cast<volatile int*>(p) = v;
#endif
}

// The block's ticket, the same in every thread. Every thread of the block calls it, once.
__device__ __forceinline__ unsigned take_ticket(unsigned* tickets) {
  __shared__ unsigned ticket;
  if (threadIdx.x == 0) ticket = atomicAdd(tickets, 1u);
  __syncthreads();
  return ticket;
}

// Returns once *published >= count: what the blocks that published up to count wrote before it
// can then be read (with __ldcg). Every thread of the block calls it.
__device__ __forceinline__ void wait_until_published(const int* published, int count) {
  if (threadIdx.x == 0)
    while (load_acquire(published) < count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
      __nanosleep(32);
#endif
    }
  __syncthreads();
}

// Makes what every thread of the block wrote so far visible to a block that waits for count, and
// what they read so far safe to overwrite by it. Every thread of the block calls it.
// One fence is enough: the barrier orders every thread's accesses before thread 0's fence and
// release (the PTX memory model's causality order is transitive through bar.sync, as the
// cooperative-groups grid barrier relies on), and a fence in every thread made the link slower
// (H200, B=1, H=8, T=16k: 1.41 against 1.27 ms forward+backward; docs/benchmarks.md).
__device__ __forceinline__ void publish(int* published, int count) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    store_release(published, count);
  }
}

}  // namespace linea::cuda
