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
// (autograd/engine.h's hook), the bucket's gradients are copied into one flat buffer and averaged
// across ranks on the communicator's side stream, while backward goes on with the earlier layers.
//
// From that copy on, each parameter's gradient is a view of its slice of the bucket (DDP's
// gradient_as_bucket_view): the average lands in the gradients themselves, with no copy back and
// no pass of its own (the transport divides by the number of ranks as it sums).
//
// The step's other shared numbers (each rank's losses and its wish to stop) travel at the end of
// the last bucket (share()), so that agreeing on them costs no collective and no wait of its own:
// the step reads them once, with the gradient norm (train_step.cpp).
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
// the order they are reduced: the first holds the last parameters. Each bucket lists parameter
// indices, in decreasing order.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<int64_t>& param_bytes, int64_t cap_bytes);

// What every rank agrees on after a step: the mean over the ranks of each micro-batch's loss (in
// the order given to share()), and whether any rank asked to stop.
struct Agreement {
  std::vector<double> losses;
  bool stop = false;
};

class GradientSync {
 public:
  // params: the parameters that train, all of one floating dtype, on comm.device(). The flat
  // buffers are allocated once and kept: the side stream may still read them while the caching
  // allocator would otherwise hand them to the next kernel.
  GradientSync(dist::Communicator& comm, std::vector<Tensor> params, int64_t bucket_bytes = kDefaultBucketBytes);

  // Before the backward of the step's last micro-batch (the last bucket may start during it):
  // this rank's losses of the step (scalar tensors on its device, not read here) and whether it
  // asks to stop. The same number of losses on every rank.
  void share(const std::vector<Tensor>& losses, bool stop);

  // Pass to backward() for the step's last micro-batch: it starts each bucket as it fills.
  GradAccumulatedHook hook();

  // Once that backward has returned: starts the buckets that have not started (a parameter that
  // received no gradient counts as zeros there, and keeps no gradient) and has the device wait for
  // every average, after which each parameter's gradient is the mean over the ranks. It only
  // queues work: nothing is read back. Then readies itself for the next step.
  void finish();

  // After finish(): the shared numbers, read from the device (a wait for everything queued so
  // far, unless the caller has waited already). Throws naming the rank that failed, if one has:
  // a lost peer leaves garbage behind.
  Agreement agreement();

  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<size_t> params;    // indices into params_
    std::vector<int64_t> offsets;  // of each parameter's gradient in `flat`, in elements
    int64_t gradient_elements = 0;  // the last bucket's flat holds the shared numbers after them
    Tensor flat;
    size_t ready = 0;              // parameters whose gradient is final this step
  };

  void on_grad_accumulated(const Tensor& leaf);
  void start_filled_buckets();  // starts buckets in order while the next one is full
  void start(Bucket& bucket);
  Tensor shared_numbers() const;  // the last bucket's tail: the losses, then the stop flag

  dist::Communicator& comm_;
  std::vector<Tensor> params_;
  std::vector<size_t> bucket_of_;  // per parameter
  std::vector<Bucket> buckets_;
  size_t next_to_start_ = 0;
  std::vector<Tensor> losses_;  // this step's, from share()
  bool stop_ = false;
};

}  // namespace linea::train
