#pragma once
// The order in which the chunked scan's per-chunk blocks pass the state along when it goes from
// block to block (ScanStatePass::kChain; chunk_chain.cuh, chunked_scan_kernels.cuh: pass_state):
// which chunk a ticket stands for, how many links of its chain come before it, and the tag it
// waits for. Plain arithmetic, so that host code checks it as the kernels use it
// (tests/cuda/chain_order_test.cpp runs the protocol with blocks interleaved at random).
//
// A chain is one sequence of one sub-problem; its chunks run forward in time for the states,
// backward for their gradients. The block at chain position m (the chunk with m links before it)
// reads what comes into its chunk (the state before it, or the gradient after it) from its chain's
// slot once the slot's words carry the tag link_tag(m), and writes what goes out of it over them,
// tagged link_tag(m + 1) (chunk_chain.cuh: tagged words).
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

// How many links of the chain come before chunk's: its chain position.
constexpr int64_t links_before(int64_t chunk, int64_t chunks, bool backward) {
  return backward ? chunks - 1 - chunk : chunk;
}

// The tag of the value coming into chain position m >= 1 (the slots start zeroed: tag 0 is no value).
constexpr uint32_t link_tag(int64_t position) { return static_cast<uint32_t>(position); }

// Whether a launch of `chains` chains on `sms` SMs (one per-chunk block an SM) should pass the
// state along the chain (ScanStatePass::kAuto). A chain's links follow one another, each about a
// microsecond (the tagged state's trip through L2), so a launch takes at least chunks x that,
// however many SMs wait; with few chains that is its critical path, against which the two kernels
// of the other pass cost their own loads, decay sums and the updates' round trip through memory.
// Measured on an H200 (132 SMs), forward+backward at H=8, d=64, T=16k, chain against kernels: 8
// chains 0.754 against 0.951 ms, 16 chains 1.306 against 1.606, 64 chains 4.97 against 5.59-5.67
// (docs/benchmarks.md), so the chain from 8 chains per 132 SMs, the fewest the benchmark runs;
// with fewer, where a launch is all critical path, the kernels, which were not measured against it.
// (Before the tagged words, with a flag and a fence a link, the crossover was at 16-32 chains. A
// look-back variant, each block applying the two updates before its chunk to the state two links
// back, was measured and won nowhere.)
constexpr bool chain_pays(int64_t chains, int64_t sms) { return 132 * chains >= 8 * sms; }

}  // namespace linea::cuda::chunked
