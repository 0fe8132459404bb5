#pragma once
// The order in which the chunked scan's per-chunk blocks pass the state along when it goes from
// block to block (ScanStatePass::kChain; chunk_chain.cuh, chunked_scan_kernels.cuh: pass_state):
// which chunk a ticket stands for, how many links of its chain come before it, and the slots it
// reads and writes. Plain arithmetic, so that host code checks it as the kernels use it
// (tests/cuda/chain_order_test.cpp runs the protocol with blocks interleaved at random).
//
// A chain is one sequence of one sub-problem; its chunks run forward in time for the states,
// backward for their gradients. The block of chunk n reads what comes into its chunk (the state
// before it, or the gradient after it) from slot_in(n) and writes what goes out of it (the state
// before chunk n + 1, or the gradient after chunk n - 1) to slot_out(n), where the next link
// reads it, with `slots` per chain: chunks + 1 keeps every state (the forward's, for the backward),
// 2 is a ring. A ring of two is enough because a block writes only after its predecessor
// published, and in a ring of two the slot it writes is the one its predecessor read, before it
// published.
#include <cstdint>

namespace linea::cuda::chunked {

struct ChainPlace {
  int64_t chain, chunk;
};

// The chunk of the block with `ticket` among chains x chunks: every chain's first chunk (backward:
// its last), then every chain's second, and so on, so that the chunk before a block's own in its
// chain always has the smaller ticket.
constexpr ChainPlace ticket_place(int64_t ticket, int64_t chains, int64_t chunks, bool backward) {
  const int64_t step = ticket / chains;
  return {ticket % chains, backward ? chunks - 1 - step : step};
}

// How many links of the chain come before chunk's: its block may read once that many have published.
constexpr int64_t links_before(int64_t chunk, int64_t chunks, bool backward) {
  return backward ? chunks - 1 - chunk : chunk;
}

constexpr int64_t slot_in(int64_t chunk, int64_t slots) { return chunk % slots; }
constexpr int64_t slot_out(int64_t chunk, int64_t slots, bool backward) {
  return slot_in(backward ? chunk - 1 + slots : chunk + 1, slots);
}

// The chunk at a chain position (links_before's inverse).
constexpr int64_t chunk_at(int64_t position, int64_t chunks, bool backward) {
  return backward ? chunks - 1 - position : position;
}

// Whether a launch of `chains` chains on `sms` SMs (one per-chunk block an SM) should pass the
// state along the chain (ScanStatePass::kAuto). A chain's links follow one another, each a few
// microseconds (an L2 round trip for the flag, one for the state, a fence), so a launch takes at
// least chunks x that, however many SMs wait; the blocks' own work takes blocks / sms x a block's
// time, about six links. With a sixth as many chains as SMs the work covers the links' latency
// and the chain, which saves the state pass's kernels, is faster; with fewer, the GPU idles along
// the chain. Measured on an H200 (132 SMs), forward+backward at H=8, d=64, T=16k, chain against
// kernels: 8 chains 1.27 against 0.97 ms, 16 chains 1.55 against 1.61 (the forward alone slower:
// 0.69 against 0.62), 32 chains 2.66 against 2.93, 64 chains 5.11 against 5.63 (docs/benchmarks.md).
// A look-back variant of the chain (each block applying the two updates before its chunk to the
// state two links back, so as to wait less) was measured and won nowhere (docs/benchmarks.md).
constexpr bool chain_pays(int64_t chains, int64_t sms) { return 6 * chains >= sms; }

}  // namespace linea::cuda::chunked
