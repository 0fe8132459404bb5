#pragma once
// A value handed from block to block in a fixed order within one launch: how the chunked scan's
// per-chunk kernels (chunked_scan_kernels.cuh) carry the state from one chunk to the next without
// a kernel of their own for it.
//
// Every chunk's block does most of its work in parallel with the others: it loads its chunk, sums
// its decays, and computes the products inside the chunk and its own update of the state. Only the
// state's passage is sequential: the block of chunk n waits until the block of chunk n - 1 has
// written the state after chunk n - 1, computes the state after its own chunk from it (elementwise:
// the decay times that state plus the chunk's update), writes it, then goes on with its chunk.
//
// Waiting for another block is safe only while that block is sure to run: blocks are not started
// in the order of blockIdx, nor all at once. So a block does not take its chunk from blockIdx but
// from a counter (`take_ticket`): the n-th block to start gets ticket n, the chunks are numbered
// so that the one a block waits for has a smaller ticket, and a block with a smaller ticket has
// already started, and itself waits only for smaller tickets. No block can wait for one that is
// not running, so none waits forever. A persistent block (chunked_scan_kernels.cuh:
// for_block_chunk) takes a ticket for every chunk it does, asking for the next while it works on
// one; the one it holds is larger than the one it works on, so the argument stands.
//
// Tagged words: the value travels with its own flag. Each 32-bit piece of it goes in a 64-bit word
// whose high half says which link wrote it (`TaggedWord`); a thread of the next block reads the
// very words the same thread of this block wrote (both walk the tile in one order) and reads again
// until every word carries the tag it waits for. An aligned 64-bit access is single-copy atomic,
// so a word with the right tag holds the right piece. No block-wide flag, barrier or fence is on
// the path: a flag written after the value needs a fence between the two (the value must be
// visible before the flag is), and that fence, with the barrier gathering the block's writes before
// it, sat on every block's path. Measured on an H200 (B=8, H=8, T=16k, docs/benchmarks.md): with a
// flag, the links' memory traffic and ordering took 0.42 ms of a 5.07 ms forward + backward and
// waiting 0.05; in tagged words the whole takes 4.97 ms, and with 8 chains 0.75 against 1.29.
// CUB's single-pass prefix scan packs its partial sums with their status the same way.
//
// What a thread reads and writes are relaxed accesses at GPU scope: they go to L2 (the SM's L1 is
// not kept coherent with other SMs' writes). One slot per chain is enough: a thread reads its words
// and then overwrites them with the next value, which only the next block's same thread reads.
#include <cstdint>

namespace linea::cuda {

using TaggedWord = unsigned long long;

// The launch's shared counter and its chains' slots, zero before it (cudaMemsetAsync).
struct ChunkChain {
  unsigned* tickets;  // the next ticket to hand out
  TaggedWord* slots;  // per chain, the value on its way from block to block, in tagged words
};

// The block's ticket, the same in every thread. Every thread of the block calls it, once.
__device__ __forceinline__ unsigned take_ticket(unsigned* tickets) {
  __shared__ unsigned ticket;
  if (threadIdx.x == 0) ticket = atomicAdd(tickets, 1u);
  __syncthreads();
  return ticket;
}

// Two neighbouring tagged words, read or written as one 16-byte access (two single-copy atomic
// 64-bit words, in either order).
__device__ __forceinline__ void load_word_pair(const TaggedWord* p, TaggedWord& a, TaggedWord& b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("ld.relaxed.gpu.global.v2.b64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
#else
  a = static_cast<const volatile TaggedWord*>(p)[0];
  b = static_cast<const volatile TaggedWord*>(p)[1];
#endif
}

__device__ __forceinline__ void store_word_pair(TaggedWord* p, TaggedWord a, TaggedWord b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("st.relaxed.gpu.global.v2.b64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
#else
  static_cast<volatile TaggedWord*>(p)[0] = a;
  static_cast<volatile TaggedWord*>(p)[1] = b;
#endif
}

__device__ __forceinline__ TaggedWord tag_piece(uint32_t piece, uint32_t tag) {
  return static_cast<TaggedWord>(tag) << 32 | piece;
}
__device__ __forceinline__ uint32_t tag_of(TaggedWord w) { return static_cast<uint32_t>(w >> 32); }
__device__ __forceinline__ uint32_t piece_of(TaggedWord w) { return static_cast<uint32_t>(w); }

// Two neighbouring elements of a value (float or double) in tagged words: sizeof(T) / 4 words each.
template <class T>
struct TaggedPair {
  static constexpr int kWords = 2 * static_cast<int>(sizeof(T) / 4);
  TaggedWord w[kWords];

  __device__ __forceinline__ void load(const TaggedWord* p) {
#pragma unroll
    for (int k = 0; k < kWords; k += 2) load_word_pair(p + k, w[k], w[k + 1]);
  }
  __device__ __forceinline__ bool tagged(uint32_t tag) const {
    bool all = true;
#pragma unroll
    for (int k = 0; k < kWords; ++k) all &= tag_of(w[k]) == tag;
    return all;
  }
  __device__ __forceinline__ void values(T& x, T& y) const {
    if constexpr (sizeof(T) == 4) {
      x = __uint_as_float(piece_of(w[0])), y = __uint_as_float(piece_of(w[1]));
    } else {
      x = __longlong_as_double(static_cast<long long>(static_cast<uint64_t>(piece_of(w[1])) << 32 | piece_of(w[0])));
      y = __longlong_as_double(static_cast<long long>(static_cast<uint64_t>(piece_of(w[3])) << 32 | piece_of(w[2])));
    }
  }
  // Writes x, y tagged at p.
  static __device__ __forceinline__ void store(TaggedWord* p, T x, T y, uint32_t tag) {
    if constexpr (sizeof(T) == 4) {
      store_word_pair(p, tag_piece(__float_as_uint(x), tag), tag_piece(__float_as_uint(y), tag));
    } else {
      const uint64_t bx = static_cast<uint64_t>(__double_as_longlong(x));
      const uint64_t by = static_cast<uint64_t>(__double_as_longlong(y));
      store_word_pair(p, tag_piece(static_cast<uint32_t>(bx), tag), tag_piece(static_cast<uint32_t>(bx >> 32), tag));
      store_word_pair(p + 2, tag_piece(static_cast<uint32_t>(by), tag),
                      tag_piece(static_cast<uint32_t>(by >> 32), tag));
    }
  }
};

// Reads pairs[k] from at(k) for k < count until every word carries `tag`. All reads are asked for
// before any is looked at (one trip to L2, not one a pair), and all again while any is missing.
template <int kCount, class T, class At>
__device__ __forceinline__ void take_tagged(TaggedPair<T> (&pairs)[kCount], const At& at, uint32_t tag) {
  for (;;) {
#pragma unroll
    for (int k = 0; k < kCount; ++k) pairs[k].load(at(k));
    bool all = true;
#pragma unroll
    for (int k = 0; k < kCount; ++k) all &= pairs[k].tagged(tag);
    if (all) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(32);
#endif
  }
}

}  // namespace linea::cuda
