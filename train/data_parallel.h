#pragma once
// How the ranks of a data-parallel run divide the data. Every rank draws the same global batch
// from the same seeded batcher (drawing costs nothing beside a step) and trains on its own block
// of rows of it: rank r of N takes rows [r B/N, (r+1) B/N). So a run with a given seed and global
// batch sees the same data whatever N is, and a checkpoint (which records the global batcher)
// resumes on a different number of GPUs.
#include "train/batcher.h"

namespace linea::train {

// Rank `rank`'s rows of a global batch whose row count world divides.
Batch rows_of_rank(const Batch& global, int rank, int world);

// The per-rank batch of a resumed run: the checkpoint's global batch split over `world` ranks
// (an Error when it does not divide).
int64_t per_rank_batch(int64_t global_batch, int world);

}  // namespace linea::train
