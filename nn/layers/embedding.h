#pragma once
// Embedding: a lookup table of learned vectors.
//   ids (...) int64 in [0, vocab) -> (..., dim), row ids[i] of W (vocab, dim).
// W ~ N(0, 0.02^2) as in GPT-2 / Pythia: small enough that a tied output head starts with
// near-uniform logits. No weight decay (AdamW should not pull rare tokens' rows to zero).
#include "nn/module.h"

namespace linea::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t vocab_size, int64_t dim, Generator& gen, double std = 0.02);

  Tensor forward(const Tensor& ids) const;

  int64_t vocab_size() const { return weight.size(0); }
  int64_t dim() const { return weight.size(1); }

  Tensor weight;  // (vocab, dim), registered as "weight"
};

}  // namespace linea::nn
