#include "train/data_parallel.h"

#include "autograd/ops.h"

namespace linea::train {

Batch rows_of_rank(const Batch& global, int rank, int world) {
  const int64_t rows = global.inputs.shape()[0];
  LINEA_CHECK(world > 0 && rank >= 0 && rank < world, "rows_of_rank", "rank ", rank, " of ", world);
  LINEA_CHECK(rows % world == 0, "rows_of_rank", "a batch of ", rows, " rows does not split over ", world, " ranks");
  if (world == 1) return global;
  const int64_t each = rows / world;
  return {contiguous(narrow(global.inputs, 0, rank * each, each)),
          contiguous(narrow(global.targets, 0, rank * each, each))};
}

int64_t per_rank_batch(int64_t global_batch, int world) {
  LINEA_CHECK(global_batch % world == 0, "train", "--resume: the checkpoint's global batch of ", global_batch,
              " sequences does not split over ", world, " ranks; resume on a number of GPUs that divides it");
  return global_batch / world;
}

}  // namespace linea::train
