#pragma once
// The CUDA kernel set (see tensor/backend.h) of one device, and the switches of its math.
// Seen by CPU-only code (cuda/no_cuda.cpp implements it there), so it names no CUDA type.
#include <string_view>

#include "tensor/backend.h"

namespace linea::cuda {

// The backend of GPU `device` (one instance per device); an Error when it does not exist.
const Backend& cuda_backend(int device);

// float32 GEMMs on TF32 tensor cores (10-bit mantissa inputs, float32 accumulation): on by
// default, as in cuBLAS-based frameworks, because it is several times faster and training does
// not notice; off with set_tf32(false) or the environment variable LINEA_TF32=0, for exact
// float32 comparisons. float64 is never affected.
void set_tf32(bool enabled);
bool tf32_enabled();

// How the chunked gated scan carries its state from chunk to chunk
// (cuda/kernels/chunked_scan_kernels.cuh): kKernels, in two kernels of its own (each chunk's
// update, then an elementwise scan over the chunks) between the per-chunk kernels; kChain, passed
// from each chunk's block to the next inside the per-chunk kernels; kAuto (the default), the chain
// when a launch has enough chains (sequences x tiles of the state: 8 per 132 SMs, the fewest
// measured) that its links are not all its time, else the kernels (cuda/kernels/chain_order.h:
// chain_pays).
// set_scan_state_pass, or the environment variable LINEA_SCAN_STATES=auto|kernels|chain, picks.
enum class ScanStatePass { kKernels, kChain, kAuto };
inline constexpr ScanStatePass kEveryScanStatePass[] = {ScanStatePass::kKernels, ScanStatePass::kChain,
                                                        ScanStatePass::kAuto};
// The names LINEA_SCAN_STATES and `linea bench scan --state-passes` take.
inline const char* scan_state_pass_name(ScanStatePass pass) {
  switch (pass) {
    case ScanStatePass::kKernels: return "kernels";
    case ScanStatePass::kChain: return "chain";
    case ScanStatePass::kAuto: return "auto";
  }
  return "?";
}
// The pass of that name, false if there is none.
inline bool scan_state_pass_named(std::string_view name, ScanStatePass* pass) {
  for (const ScanStatePass p : kEveryScanStatePass)
    if (name == scan_state_pass_name(p)) return *pass = p, true;
  return false;
}
void set_scan_state_pass(ScanStatePass pass);
ScanStatePass scan_state_pass();

// The most blocks a chained launch of the chunked scan runs when its blocks are persistent (each
// takes chunk after chunk: chunked_scan_kernels.cuh, for_block_chunk); 0, the default, is as many
// as the GPU holds at once. The tests set a few, so that every block takes many chunks.
void set_scan_persistent_blocks(int most);
int scan_persistent_blocks();

}  // namespace linea::cuda
