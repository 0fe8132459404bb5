#pragma once
// A cached attention step's per-split results as the input row of the product after it.
//
// At batch 1 a softmax decoding step splits each head's cached columns over many blocks
// (cuda/kernels/cached_attention.cu), and the splits' results must be merged before the output
// projection reads them. A kernel of its own for the merge added 2.9 us to every layer of a graphed
// step on an H100 (waiting for the splits, its launch, a trip through memory). Instead
// cached_attention_projected hands the splits to the product: every block of fused_linear's
// one-row kernel merges the whole row as it stages it (fused_linear_row.cuh: stage_merged_row),
// 70 KB of partial results from L2 at the standard shape, and the softmax step at a 2k context
// went from 7,745 - 8,002 to 8,109 - 8,155 tokens/s on an H100 (docs/benchmarks.md).
#include <cstdint>

#include "tensor/backend.h"

namespace linea::cuda {

// The most splits a product merges: each thread asks for one weighted value per split at once,
// a register each, beside the weights it holds before its wait (a more-split row, from caches
// longer than about 2.5k columns at batch 1, is merged by the merge kernel as before).
constexpr int kMaxMergedSplits = 40;

// One batch row's splits, float32 (the products merge no other type).
struct AttentionSplits {
  const float* max = nullptr;  // (H, splits): each split's largest score
  const float* sum = nullptr;  // (H, splits): its sum of exp(score - max)
  const float* acc = nullptr;  // (H, splits, dh): its sum of exp(score - max) v
  const int* live = nullptr;   // how many splits (the first) hold seen columns; 0: a row of NaN
  int64_t* positions = nullptr;  // the row's position, advanced by the product's first block
  int splits = 0, dh = 0;
};

// Whether fused_linear_from_splits takes this projection (x undefined, one row of heads x dh) with
// `splits` splits on `device`: float32, few enough splits, and the one-row kernel that takes its
// outputs in pairs with 16-byte loads (the standard shape's output projection, 512 x 512). Only
// that kernel merges, on a branch of its own: the step's other products run the same kernel, and a
// separate kernel for the merging product measured slower (docs/benchmarks.md).
bool takes_attention_splits(const FusedLinearInputs& projection, int64_t heads, int64_t dh, int64_t splits,
                            int device);

// fused_linear with no norm and no activation whose one input row is `splits` merged (every head's
// dh values in turn), on `device`'s stream.
void fused_linear_from_splits(const FusedLinearInputs& projection, const AttentionSplits& splits, const Tensor& out,
                              int device);

}  // namespace linea::cuda
