#pragma once
// A communicator joins the processes of one data-parallel run (one per GPU, on one host or
// several) so they can sum tensors across ranks. On GPUs it is NCCL (nccl_communicator.h), the
// engine PyTorch and the big frameworks scale on; linea has no transport of its own.
//
// The calls are collective: every rank makes the same calls, in the same order, with tensors of
// the same shape, or the run hangs (which the communicator then reports, below).
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace linea::dist {

// What an all-reduce leaves in every rank's buffer: the sum over the ranks, or their mean (the
// sum times 1 / size, in the transport's own kernel: NCCL's ncclAvg, with no pass of its own).
enum class Reduction { Sum, Mean };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The device this rank's tensors live on.
  virtual Device device() const = 0;

  // Reduces `buffer` (contiguous, float32 or float64, on device()) over the ranks, in place. It is
  // ordered after every kernel queued on the device before the call, and every kernel queued after
  // it sees the result: no host synchronisation is implied.
  virtual void all_reduce(const Tensor& buffer, Reduction op) = 0;

  // The same, on a side stream, so that it overlaps the kernels queued after it (the backward pass
  // that produces the next bucket of gradients). Its inputs must not be written until
  // wait_side_reductions() returns, after which every kernel queued on the device sees the
  // results. Communicators without a side stream reduce at once.
  virtual void start_side_all_reduce(const Tensor& buffer, Reduction op) { all_reduce(buffer, op); }
  virtual void wait_side_reductions() {}

  // Throws linea::Error naming the rank that failed (exited, hung past the timeout, or broke the
  // communicator) once one has; returns otherwise. Called between steps, and by a rank that has
  // just seen a result it cannot trust (a non-finite loss may be a peer's death, not the model's).
  virtual void check_healthy() {}

  // The orderly end of a successful run: waits for the device, releases the transport and tells
  // the peers that this rank is done (without it they would take its exit for a crash).
  virtual void close() {}

  // This rank is about to exit with an error: tells the others why (best effort, never throws).
  virtual void report_failure(const std::string& message) {}
};

// Sums a few host numbers over the ranks (float64 on the communicator's device): losses, counts,
// flags. Synchronises with the device to read the result, then checks the communicator's health.
std::vector<double> all_reduce_sum(Communicator& comm, const std::vector<double>& values);

// Waits until every rank has come here.
void barrier(Communicator& comm);

}  // namespace linea::dist
