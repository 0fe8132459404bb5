#include "dist/nccl_communicator.h"

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
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

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Rendezvous&& rendezvous, Device device, const NcclOptions& options)
      : rank_(rendezvous.rank()),
        size_(rendezvous.world_size()),
        device_(device),
        options_(options),
        main_stream_(cuda::use_device(device.index)) {
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
    // From here a lost peer aborts the communicator at once, from the monitor's thread.
    monitor_->on_failure([this](const std::string& message) { record_failure(message); });
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    stop_watchdog();
    if (!closed_) abort_once();  // unwinding from an error: the peers learn it from the monitor
    cudaEventDestroy(side_ready_);
    cudaEventDestroy(side_done_);
    cudaStreamDestroy(side_stream_);
    for (const InFlight& f : in_flight_) cudaEventDestroy(f.done);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return device_; }

  void all_reduce_sum(const Tensor& buffer) override { reduce(buffer, main_stream_); }

  void start_side_all_reduce_sum(const Tensor& buffer) override {
    cuda::use_device(device_.index);
    // The side stream waits for the gradients queued so far, and only for them.
    LINEA_CUDA_CHECK(cudaEventRecord(side_ready_, main_stream_), "nccl");
    LINEA_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, side_ready_, 0), "nccl");
    reduce(buffer, side_stream_);
    side_pending_ = true;
  }

  void wait_side_reductions() override {
    if (!side_pending_) return;
    LINEA_CUDA_CHECK(cudaEventRecord(side_done_, side_stream_), "nccl");
    LINEA_CUDA_CHECK(cudaStreamWaitEvent(main_stream_, side_done_, 0), "nccl");
    side_pending_ = false;
  }

  void check_healthy() override {
    std::optional<std::string> failure = monitor_->failure();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure_) failure = failure_;
    }
    if (failure)
      ::linea::fail("data-parallel", "rank ", rank_, " stops: ", *failure,
                    ". The last checkpoint written stays as it was; resume the run with --resume");
  }

  void close() override {
    if (closed_) return;
    check_healthy();
    LINEA_CUDA_CHECK(cudaStreamSynchronize(side_stream_), "nccl");
    LINEA_CUDA_CHECK(cudaStreamSynchronize(main_stream_), "nccl");
    stop_watchdog();
    LINEA_NCCL_CHECK(ncclCommFinalize(comm_), "closing the communicator");
    wait_for_nccl("closing the communicator");
    ncclCommDestroy(comm_);
    closed_ = true;
    monitor_->close();
  }

  void report_failure(const std::string& message) override { monitor_->report_failure(message); }

 private:
  struct InFlight {
    cudaEvent_t done;
    Clock::time_point since;
  };

  void reduce(const Tensor& buffer, cudaStream_t stream) {
    check_healthy();
    LINEA_CHECK(buffer.device() == device_ && buffer.is_contiguous() &&
                    (buffer.dtype() == kFloat32 || buffer.dtype() == kFloat64),
                "all_reduce_sum", "needs a contiguous float32 or float64 tensor on ", device_.str(), ", got ",
                buffer.describe());
    if (buffer.numel() == 0) return;
    cuda::use_device(device_.index);
    const ncclDataType_t type = buffer.dtype() == kFloat32 ? ncclFloat32 : ncclFloat64;
    void* data = const_cast<void*>(buffer.raw_data());
    LINEA_NCCL_CHECK(ncclAllReduce(data, data, buffer.numel(), type, ncclSum, comm_, stream), "all_reduce_sum");
    wait_for_nccl("all_reduce_sum");
    // The watchdog times the collective from here to its completion on the stream.
    cudaEvent_t done;
    LINEA_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "nccl");
    LINEA_CUDA_CHECK(cudaEventRecord(done, stream), "nccl");
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_.push_back({done, Clock::now()});
  }

  // A non-blocking communicator may answer ncclInProgress: the call is finished once its async
  // state says so. A failure noticed meanwhile (a peer lost during init) ends the wait.
  void wait_for_nccl(const char* what) {
    const auto start = Clock::now();
    while (true) {
      ncclResult_t state = ncclSuccess;
      LINEA_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state), what);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) ::linea::fail("nccl", what, " failed: ", ncclGetErrorString(state));
      check_healthy();
      LINEA_CHECK(std::chrono::duration<double>(Clock::now() - start).count() < options_.timeout_s, "nccl", what,
                  " did not finish within ", options_.timeout_s, " s");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // The watchdog: NCCL's own errors and collectives past the timeout. (A lost peer arrives through
  // the monitor's callback.)
  void watch() {
    cudaSetDevice(device_.index);
    while (!stop_watch_.load()) {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state != ncclSuccess && state != ncclInProgress)
        record_failure(std::string("NCCL reported ") + ncclGetErrorString(state) + " (" + ncclGetLastError(comm_) + ")");
      check_in_flight();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  void check_in_flight() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!in_flight_.empty() && cudaEventQuery(in_flight_.front().done) == cudaSuccess) {
      cudaEventDestroy(in_flight_.front().done);
      in_flight_.pop_front();
    }
    if (in_flight_.empty() || failure_) return;
    const double waited = std::chrono::duration<double>(Clock::now() - in_flight_.front().since).count();
    if (waited < options_.timeout_s) return;
    lock.unlock();
    record_failure("a collective on rank " + std::to_string(rank_) + " did not complete within " +
         std::to_string(static_cast<int>(options_.timeout_s)) +
         " s: another rank is hung inside its step (or slower than --dist-timeout allows)");
  }

  // The first failure wins; the communicator is aborted once, which frees the kernels that wait.
  void record_failure(const std::string& message) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure_) return;
      failure_ = message;
    }
    abort_once();
  }

  void abort_once() {
    if (!aborted_.exchange(true) && comm_ != nullptr) ncclCommAbort(comm_);
  }

  void stop_watchdog() {
    stop_watch_.store(true);
    if (watchdog_.joinable()) watchdog_.join();
  }

  const int rank_, size_;
  const Device device_;
  const NcclOptions options_;
  cudaStream_t main_stream_ = nullptr, side_stream_ = nullptr;
  cudaEvent_t side_ready_ = nullptr, side_done_ = nullptr;
  bool side_pending_ = false;
  ncclComm_t comm_ = nullptr;
  std::optional<PeerMonitor> monitor_;
  std::thread watchdog_;
  std::atomic<bool> stop_watch_{false}, aborted_{false};
  bool closed_ = false;
  std::mutex mutex_;  // failure_ and in_flight_
  std::optional<std::string> failure_;
  std::deque<InFlight> in_flight_;
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
