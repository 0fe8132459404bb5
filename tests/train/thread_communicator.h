#pragma once
// A test double of dist::Communicator: the ranks of a data-parallel run as threads of one process,
// on the CPU, summing through shared memory. It lets CI (which has no GPU, hence no NCCL) run the
// trainer's data-parallel logic for real: sharding, buckets, agreement on losses and stops. Sums
// are taken in rank order, and a mean is that sum times 1 / size, so runs are deterministic.
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "dist/communicator.h"

namespace linea::testing {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), slots_(size) {}
  int size() const { return size_; }

  void all_reduce(int rank, const Tensor& buffer, dist::Reduction op) {
    std::unique_lock<std::mutex> lock(mutex_);
    slots_[rank] = buffer;
    const int64_t generation = generation_;
    if (++arrived_ < size_) {
      changed_.wait(lock, [&] { return generation_ != generation; });
      return;
    }
    // The last to arrive sums for everyone, while the others wait.
    const double factor = op == dist::Reduction::Mean ? 1.0 / size_ : 1.0;
    if (buffer.dtype() == kFloat32) reduce_into_all<float>(static_cast<float>(factor));
    else reduce_into_all<double>(factor);
    arrived_ = 0;
    ++generation_;
    changed_.notify_all();
  }

 private:
  template <class T>
  void reduce_into_all(T factor) {
    const int64_t n = slots_[0].numel();
    for (int64_t i = 0; i < n; ++i) {
      T total = slots_[0].data<T>()[i];
      for (int r = 1; r < size_; ++r) total += slots_[r].data<T>()[i];
      if (factor != T(1)) total *= factor;
      for (int r = 0; r < size_; ++r) slots_[r].data<T>()[i] = total;
    }
  }

  const int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Tensor> slots_;
  int arrived_ = 0;
  int64_t generation_ = 0;
};

class ThreadCommunicator final : public dist::Communicator {
 public:
  ThreadCommunicator(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  Device device() const override { return kCPU; }
  void all_reduce(const Tensor& buffer, dist::Reduction op) override {
    ++reductions;
    group_.all_reduce(rank_, buffer, op);
  }
  int64_t reductions = 0;

 private:
  ThreadGroup& group_;
  const int rank_;
};

// Runs body(rank, comm) on `size` threads, one rank each, and waits for all. An exception in a
// rank is rethrown here after every thread has ended.
inline void run_ranks(int size, const std::function<void(int rank, dist::Communicator& comm)>& body) {
  ThreadGroup group(size);
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      ThreadCommunicator comm(group, r);
      try {
        body(r, comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace linea::testing
