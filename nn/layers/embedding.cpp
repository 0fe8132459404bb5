#include "nn/layers/embedding.h"

#include "nn/init.h"
#include "nn/layers/check.h"

namespace linea::nn {

Embedding::Embedding(int64_t vocab_size, int64_t dim, Generator& gen, double std) {
  check_positive(vocab_size, "vocab_size", "Embedding");
  check_positive(dim, "dim", "Embedding");
  weight = empty({vocab_size, dim});
  init::normal_(weight, 0.0, std, gen);
  register_parameter("weight", &weight, /*weight_decay=*/false);
}

Tensor Embedding::forward(const Tensor& ids) const {
  LINEA_CHECK(ids.defined() && ids.dtype() == kInt64, "Embedding", "expects int64 token ids, got ",
              ids.defined() ? ids.describe() : std::string("an undefined tensor"));
  // An id outside [0, vocab) is reported by the lookup itself, with the id and the vocab size.
  return embedding(weight, ids);
}

}  // namespace linea::nn
