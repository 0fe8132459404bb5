#include "cuda/deferred_checks.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda/check.h"
#include "cuda/stream.h"
#include "tensor/error.h"

namespace linea::cuda {

namespace {

// Pinned slots for the copied values: enough for every check a training step queues between two
// waits (two per forward), with room for many micro-batches. When they run out, the host waits
// and settles the pending checks first.
constexpr int kSlots = 4096;

struct Pending {
  int slot;
  const char* op;
  CheckVerdict verdict;
};

struct DeviceChecks {
  int64_t* host = nullptr;  // kSlots * kMaxCheckValues, pinned
  int next_slot = 0;
  std::vector<Pending> pending;
};

std::mutex mutex;
std::map<int, DeviceChecks> checks;

// The pending checks of `device`, taken out under the lock; the caller has waited for the stream.
std::vector<Pending> take_pending(int device, const int64_t*& host) {
  std::lock_guard<std::mutex> lock(mutex);
  DeviceChecks& c = checks[device];
  host = c.host;
  c.next_slot = 0;
  return std::exchange(c.pending, {});
}

void raise_first_failure(const std::vector<Pending>& pending, const int64_t* host) {
  for (const Pending& p : pending) {
    const std::string message = p.verdict(host + static_cast<size_t>(p.slot) * kMaxCheckValues);
    if (!message.empty()) fail(p.op, message);
  }
}

}  // namespace

void defer_check(int device, const int64_t* flags, int count, const char* op, CheckVerdict verdict) {
  LINEA_CHECK(count > 0 && count <= kMaxCheckValues, "cuda.check", "a check copies 1 to ", kMaxCheckValues,
              " values, got ", count);
  const cudaStream_t stream = use_device(device);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  LINEA_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture), op);
  if (capture != cudaStreamCaptureStatusNone) return;
  bool full = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    DeviceChecks& c = checks[device];
    if (!c.host) {
      void* pinned = nullptr;
      LINEA_CUDA_CHECK(cudaMallocHost(&pinned, sizeof(int64_t) * kSlots * kMaxCheckValues), op,
                       "pinned memory for the deferred checks");
      c.host = static_cast<int64_t*>(pinned);
    }
    full = c.next_slot == kSlots;
  }
  if (full) {  // settle what is pending before reusing its slots
    LINEA_CUDA_CHECK(cudaStreamSynchronize(stream), op);
    raise_failed_checks(device);
  }
  std::lock_guard<std::mutex> lock(mutex);
  DeviceChecks& c = checks[device];
  const int slot = c.next_slot++;
  int64_t* dst = c.host + static_cast<size_t>(slot) * kMaxCheckValues;
  LINEA_CUDA_CHECK(cudaMemcpyAsync(dst, flags, sizeof(int64_t) * count, cudaMemcpyDeviceToHost, stream), op);
  c.pending.push_back({slot, op, std::move(verdict)});
}

void raise_failed_checks(int device) {
  const int64_t* host = nullptr;
  const std::vector<Pending> pending = take_pending(device, host);
  raise_first_failure(pending, host);
}

}  // namespace linea::cuda
