#include "cpu/parallel.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace linea::cpu {

namespace {

thread_local bool t_inside_parallel_region = false;

class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 0; i < threads - 1; ++i) workers_.emplace_back([this] { work(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs task(i) for i in [0, count), the caller taking part; returns when all are done and
  // rethrows the first exception a task threw.
  void run(int count, const std::function<void(int)>& task) {
    std::lock_guard<std::mutex> one_region_at_a_time(run_mutex_);
    std::unique_lock<std::mutex> lock(mutex_);
    task_ = &task;
    next_ = 0;
    count_ = count;
    pending_ = count;
    error_ = nullptr;
    ++generation_;
    wake_.notify_all();
    drain(lock);
    done_.wait(lock, [this] { return pending_ == 0; });
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Takes tasks until none are left; called with the lock held.
  void drain(std::unique_lock<std::mutex>& lock) {
    while (task_ != nullptr && next_ < count_) {
      const int i = next_++;
      const auto* task = task_;
      lock.unlock();
      std::exception_ptr error;
      t_inside_parallel_region = true;
      try {
        (*task)(i);
      } catch (...) {
        error = std::current_exception();
      }
      t_inside_parallel_region = false;
      lock.lock();
      if (error && !error_) error_ = error;
      if (--pending_ == 0) done_.notify_all();
    }
  }

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    uint64_t seen = 0;
    while (true) {
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      drain(lock);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // parallel regions from different user threads take turns
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* task_ = nullptr;
  int next_ = 0, count_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

int default_threads() {
  if (const char* env = std::getenv("LINEA_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::mutex g_pool_mutex;
int g_threads = 0;

ThreadPool& pool() {
  static ThreadPool* instance = nullptr;  // leaked on purpose: workers must outlive static dtors
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (g_threads == 0) g_threads = default_threads();
  if (instance == nullptr || instance->size() != g_threads) {
    delete instance;
    instance = new ThreadPool(g_threads);
  }
  return *instance;
}

}  // namespace

int num_threads() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (g_threads == 0) g_threads = default_threads();
  return g_threads;
}

void set_num_threads(int n) {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  g_threads = std::max(1, n);
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = t_inside_parallel_region ? 1 : num_threads();
  const int64_t chunks = std::min<int64_t>(threads, n / grain);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  pool().run(static_cast<int>(chunks), [&](int i) {
    const int64_t begin = n * i / chunks, end = n * (i + 1) / chunks;
    fn(begin, end);
  });
}

}  // namespace linea::cpu
