#pragma once
// The gradients of a data-parallel step. Every rank runs backward on its own rows of the batch;
// before the update every rank must hold the mean of all ranks' gradients, so that the replicas
// stay identical.
//
// Summing each parameter's gradient by itself would cost one collective per tensor (a few hundred
// small messages a step); one collective over everything would wait for the whole backward pass
// to end. DDP's answer, kept here: the parameters are grouped into buckets of a few tens of MB, in
// the reverse of their creation order, which is roughly the order in which backward finishes their
// gradients (the last layer's first). When the last gradient of a bucket has been accumulated
// (autograd/engine.h's hook), the bucket's gradients are copied into one flat buffer and summed
// across ranks on the communicator's side stream, while backward goes on with the earlier layers.
//
// Buckets are started strictly in order, so every rank issues the same collectives in the same
// order whatever the order its hooks fire in.
#include <cstdint>
#include <vector>

#include "autograd/engine.h"
#include "dist/communicator.h"
#include "tensor/tensor.h"

namespace linea::train {

// Default bucket size: large enough that a collective's fixed cost is small beside its transfer,
// small enough that the first bucket is ready early in the backward pass (PyTorch uses 25 MB).
inline constexpr int64_t kDefaultBucketBytes = 25ll << 20;

// Groups parameters of the given sizes (in bytes, in creation order) into buckets of at most
// cap_bytes each (a parameter larger than the cap gets a bucket of its own). Buckets are listed in
// the order they are summed: the first holds the last parameters. Each bucket lists parameter
// indices, in decreasing order.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<int64_t>& param_bytes, int64_t cap_bytes);

class GradientSync {
 public:
  // params: the parameters that train, all of one floating dtype, on comm.device(). The flat
  // buffers are allocated once and kept: the side stream may still read them while the caching
  // allocator would otherwise hand them to the next kernel.
  GradientSync(dist::Communicator& comm, std::vector<Tensor> params, int64_t bucket_bytes = kDefaultBucketBytes);

  // Pass to backward() for the step's last micro-batch: it starts each bucket as it fills.
  GradAccumulatedHook hook();

  // Once that backward has returned: starts the buckets that have not started (a parameter that
  // received no gradient counts as zeros there, and keeps no gradient), waits for every sum, and
  // leaves in each parameter's gradient the mean over the ranks. Then readies itself for the next
  // step.
  void finish();

  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<size_t> params;    // indices into params_
    std::vector<int64_t> offsets;  // of each parameter's gradient in `flat`, in elements
    Tensor flat;
    size_t ready = 0;              // parameters whose gradient is final this step
  };

  void on_grad_accumulated(const Tensor& leaf);
  void start_filled_buckets();  // starts buckets in order while the next one is full
  void start(Bucket& bucket);

  dist::Communicator& comm_;
  std::vector<Tensor> params_;
  std::vector<size_t> bucket_of_;  // per parameter
  std::vector<Bucket> buckets_;
  size_t next_to_start_ = 0;
};

}  // namespace linea::train
