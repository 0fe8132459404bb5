#include "dist/nccl_communicator.h"

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "cuda/check.h"
#include "cuda/stream.h"
#include "dist/peer_monitor.h"

namespace linea::dist {

namespace {

using Clock = std::chrono::steady_clock;

#define LINEA_NCCL_CHECK(call, what)                                                                     \
  do {                                                                                                   \
    const ncclResult_t linea_nccl_ = (call);                                                             \
    if (linea_nccl_ != ncclSuccess && linea_nccl_ != ncclInProgress)                                     \
      ::linea::fail("nccl", what, ": " #call " failed: ", ncclGetErrorString(linea_nccl_), " (",         \
                    ncclGetLastError(nullptr), ")");                                                     \
  } while (0)

// What the watchdog thread shares with the communicator. It outlives the communicator when the
// run fails: a thread stuck behind a lost peer is not waited for, and the watchdog may have to end
// the process itself.
struct Watch {
  struct InFlight {
    cudaEvent_t done;
    Clock::time_point since;
  };

  ncclComm_t comm = nullptr;
  int rank = 0, device = 0;
  double timeout_s = 0;
  std::atomic<bool> stop{false};
  std::mutex mutex;  // everything below
  std::optional<std::string> failure;
  Clock::time_point failed_at;
  bool abort_started = false;  // comm must not be used by the watchdog from then on
  std::deque<InFlight> in_flight;

  // The first failure wins. Cheap and non-blocking: the monitor's thread calls it.
  void record(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failure) return;
    failure = message;
    failed_at = Clock::now();
  }

  std::optional<std::string> recorded() {
    std::lock_guard<std::mutex> lock(mutex);
    return failure;
  }
};

// How long a rank that has seen a failure may take to wind down (its error printed, its threads
// and CUDA context torn down) before the process is ended: a CUDA call queued behind a collective
// with a dead peer may never return, whatever NCCL's abort does, and may hold the driver's locks.
constexpr double kWindDownSeconds = 15;

// The watchdog's loop, every 20 ms: NCCL's own errors, collectives past the timeout, and the abort
// once a failure is known (from a thread of its own, as ncclCommAbort may block). The lock is
// never held across a CUDA or NCCL call, which may block behind a stuck collective.
void watch(std::shared_ptr<Watch> w) {
  cudaSetDevice(w->device);
  while (!w->stop.load()) {
    std::unique_lock<std::mutex> lock(w->mutex);
    const bool abort_now = w->failure && !w->abort_started;
    if (abort_now) w->abort_started = true;
    const bool may_ask_nccl = !w->abort_started;
    const std::optional<Watch::InFlight> oldest =
        w->in_flight.empty() ? std::nullopt : std::optional<Watch::InFlight>(w->in_flight.front());
    lock.unlock();

    if (abort_now) std::thread([comm = w->comm] { ncclCommAbort(comm); }).detach();
    ncclResult_t state = ncclSuccess;
    const bool nccl_failed = may_ask_nccl && ncclCommGetAsyncError(w->comm, &state) == ncclSuccess &&
                             state != ncclSuccess && state != ncclInProgress;
    if (nccl_failed)
      w->record(std::string("NCCL reported ") + ncclGetErrorString(state) + " (" + ncclGetLastError(w->comm) + ")");
    if (oldest) {
      if (cudaEventQuery(oldest->done) == cudaSuccess) {
        cudaEventDestroy(oldest->done);
        lock.lock();
        w->in_flight.pop_front();  // only this thread pops: the front is still `oldest`
        lock.unlock();
        continue;  // look at the next one at once
      }
      if (std::chrono::duration<double>(Clock::now() - oldest->since).count() >= w->timeout_s)
        w->record("a collective on rank " + std::to_string(w->rank) + " did not complete within " +
                  std::to_string(static_cast<int>(w->timeout_s)) +
                  " s: another rank is hung inside its step (or slower than --dist-timeout allows)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The last resort, on a thread that touches neither CUDA nor NCCL, so nothing can hold it up: once
// a failure is kWindDownSeconds old and the process still runs, it says why and ends it.
void reap(std::shared_ptr<Watch> w) {
  while (!w->stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::lock_guard<std::mutex> lock(w->mutex);
    if (!w->failure || std::chrono::duration<double>(Clock::now() - w->failed_at).count() < kWindDownSeconds)
      continue;
    std::fprintf(stderr,
                 "linea: error: data-parallel: rank %d stops: %s. It could not wind down within %.0f s (a CUDA "
                 "call waits on the lost peer), so it exits now; the last checkpoint written stays as it was\n",
                 w->rank, w->failure->c_str(), kWindDownSeconds);
    std::fflush(stderr);
    std::_Exit(1);
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Rendezvous&& rendezvous, Device device, const NcclOptions& options)
      : rank_(rendezvous.rank()),
        size_(rendezvous.world_size()),
        device_(device),
        options_(options),
        main_stream_(cuda::use_device(device.index)),
        watch_(std::make_shared<Watch>()) {
    // Rank 0 draws the id that names this communicator; the rendezvous carries it to the others.
    ncclUniqueId id;
    std::string bytes;
    if (rank_ == 0) {
      LINEA_NCCL_CHECK(ncclGetUniqueId(&id), "creating the communicator's id");
      bytes.assign(reinterpret_cast<const char*>(&id), sizeof id);
    }
    bytes = rendezvous.broadcast(bytes);
    LINEA_CHECK(bytes.size() == sizeof id, "nccl", "rank 0 sent an id of ", bytes.size(), " bytes, not ", sizeof id);
    std::memcpy(&id, bytes.data(), sizeof id);
    monitor_.emplace(std::move(rendezvous).start_monitor({.heartbeat_timeout_s = options.heartbeat_timeout_s}));

    LINEA_CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking), "nccl");
    LINEA_CUDA_CHECK(cudaEventCreateWithFlags(&side_ready_, cudaEventDisableTiming), "nccl");
    LINEA_CUDA_CHECK(cudaEventCreateWithFlags(&side_done_, cudaEventDisableTiming), "nccl");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every call returns at once; wait_for_nccl() polls, and can give up
    try {
      LINEA_NCCL_CHECK(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config), "joining the communicator");
      wait_for_nccl("joining the communicator");
    } catch (...) {
      if (comm_ != nullptr) ncclCommAbort(comm_);
      throw;
    }
    watch_->comm = comm_;
    watch_->rank = rank_;
    watch_->device = device.index;
    watch_->timeout_s = options.timeout_s;
    // From here a lost peer is recorded at once, from the monitor's thread, and the watchdog aborts.
    monitor_->on_failure([w = watch_](const std::string& message) { w->record(message); });
    watchdog_ = std::thread(watch, watch_);
    reaper_ = std::thread(reap, watch_);
  }

  ~NcclCommunicator() override {
    if (closed_) return;  // close() has joined the watchdog
    // Unwinding from an error. The process is about to exit: nothing here may wait on the device,
    // which may be stuck behind a lost peer. The watchdog aborts NCCL and, should the exit itself
    // hang, ends the process (kWindDownSeconds); the peers learn of it from the monitor.
    watch_->record("rank " + std::to_string(rank_) + " is leaving the run with an error");
    if (watchdog_.joinable()) watchdog_.detach();
    if (reaper_.joinable()) reaper_.detach();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return device_; }

  void all_reduce(const Tensor& buffer, Reduction op) override { reduce(buffer, op, main_stream_); }

  void start_side_all_reduce(const Tensor& buffer, Reduction op) override {
    cuda::use_device(device_.index);
    // The side stream waits for the gradients queued so far, and only for them.
    LINEA_CUDA_CHECK(cudaEventRecord(side_ready_, main_stream_), "nccl");
    LINEA_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, side_ready_, 0), "nccl");
    reduce(buffer, op, side_stream_);
    side_pending_ = true;
  }

  void wait_side_reductions() override {
    if (!side_pending_) return;
    LINEA_CUDA_CHECK(cudaEventRecord(side_done_, side_stream_), "nccl");
    LINEA_CUDA_CHECK(cudaStreamWaitEvent(main_stream_, side_done_, 0), "nccl");
    side_pending_ = false;
  }

  void check_healthy() override {
    std::optional<std::string> failure = watch_->recorded();
    if (!failure) failure = monitor_->failure();
    if (failure)
      ::linea::fail("data-parallel", "rank ", rank_, " stops: ", *failure,
                    ". The last checkpoint written stays as it was; resume the run with --resume");
  }

  void close() override {
    if (closed_) return;
    check_healthy();
    LINEA_CUDA_CHECK(cudaStreamSynchronize(side_stream_), "nccl");
    LINEA_CUDA_CHECK(cudaStreamSynchronize(main_stream_), "nccl");
    check_healthy();
    watch_->stop.store(true);
    watchdog_.join();
    reaper_.join();
    LINEA_NCCL_CHECK(ncclCommFinalize(comm_), "closing the communicator");
    wait_for_nccl("closing the communicator");
    ncclCommDestroy(comm_);
    closed_ = true;
    for (const Watch::InFlight& f : watch_->in_flight) cudaEventDestroy(f.done);
    cudaEventDestroy(side_ready_);
    cudaEventDestroy(side_done_);
    cudaStreamDestroy(side_stream_);
    monitor_->close();
  }

  void report_failure(const std::string& message) override { monitor_->report_failure(message); }

 private:
  void reduce(const Tensor& buffer, Reduction op, cudaStream_t stream) {
    check_healthy();
    LINEA_CHECK(buffer.device() == device_ && buffer.is_contiguous() &&
                    (buffer.dtype() == kFloat32 || buffer.dtype() == kFloat64),
                "all_reduce", "needs a contiguous float32 or float64 tensor on ", device_.str(), ", got ",
                buffer.describe());
    if (buffer.numel() == 0) return;
    cuda::use_device(device_.index);
    const ncclDataType_t type = buffer.dtype() == kFloat32 ? ncclFloat32 : ncclFloat64;
    void* data = const_cast<void*>(buffer.raw_data());
    const ncclRedOp_t nccl_op = op == Reduction::Mean ? ncclAvg : ncclSum;
    LINEA_NCCL_CHECK(ncclAllReduce(data, data, buffer.numel(), type, nccl_op, comm_, stream), "all_reduce");
    wait_for_nccl("all_reduce");
    // The watchdog times the collective from here to its completion on the stream.
    cudaEvent_t done;
    LINEA_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "nccl");
    LINEA_CUDA_CHECK(cudaEventRecord(done, stream), "nccl");
    std::lock_guard<std::mutex> lock(watch_->mutex);
    watch_->in_flight.push_back({done, Clock::now()});
  }

  // A non-blocking communicator may answer ncclInProgress: the call is finished once its async
  // state says so. A failure noticed meanwhile (a peer lost during init) ends the wait.
  void wait_for_nccl(const char* what) {
    const auto start = Clock::now();
    while (true) {
      check_healthy();
      ncclResult_t state = ncclSuccess;
      LINEA_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state), what);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) ::linea::fail("nccl", what, " failed: ", ncclGetErrorString(state));
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      LINEA_CHECK(waited < options_.timeout_s, "nccl", what, " did not finish within ", options_.timeout_s, " s");
      // An enqueued collective is usually ready within microseconds, and every millisecond slept
      // here is a millisecond the GPU may run out of queued kernels: spin first, sleep later
      // (joining the communicator can take seconds).
      if (waited < 0.01) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  const int rank_, size_;
  const Device device_;
  const NcclOptions options_;
  cudaStream_t main_stream_ = nullptr, side_stream_ = nullptr;
  cudaEvent_t side_ready_ = nullptr, side_done_ = nullptr;
  bool side_pending_ = false;
  ncclComm_t comm_ = nullptr;
  std::shared_ptr<Watch> watch_;
  std::optional<PeerMonitor> monitor_;
  std::thread watchdog_, reaper_;
  bool closed_ = false;
};

}  // namespace

bool nccl_available() { return true; }

void keep_nvlink_multicast_off() { setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); }

std::unique_ptr<Communicator> make_nccl_communicator(Rendezvous&& rendezvous, Device device,
                                                     const NcclOptions& options) {
  LINEA_CHECK(device.kind == DeviceKind::CUDA, "nccl", "NCCL needs a CUDA device, got ", device.str());
  return std::make_unique<NcclCommunicator>(std::move(rendezvous), device, options);
}

}  // namespace linea::dist
