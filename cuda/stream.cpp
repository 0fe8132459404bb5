// Streams and per-device facts, created once per device on first use and kept for the process.
#include "cuda/stream.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda/check.h"
#include "cuda/memory.h"

namespace linea::cuda {

namespace {

struct DeviceSlots {
  int count = 0;
  std::unique_ptr<std::once_flag[]> once;
  std::vector<cudaStream_t> streams;
  std::vector<int> sms;
  std::vector<char> overlaps;  // programmatic dependent launch (launch_overlapped) allowed
};

// Sized once from the device count (which cannot change while the process runs). Never
// destroyed: streams must outlive every static tensor that might still queue work on them.
DeviceSlots& slots() {
  static DeviceSlots* s = [] {
    auto* d = new DeviceSlots;
    d->count = device_count();
    d->once = std::make_unique<std::once_flag[]>(d->count > 0 ? d->count : 1);
    d->streams.assign(d->count, nullptr);
    d->sms.assign(d->count, 0);
    d->overlaps.assign(d->count, 0);
    return d;
  }();
  return *s;
}

void check_device(int device) {
  const int count = slots().count;
  LINEA_CHECK(count > 0, "cuda", "no CUDA device is visible (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides "
              "them), so cuda:", device, " cannot be used");
  LINEA_CHECK(device >= 0 && device < count, "cuda", "device cuda:", device, " does not exist (", count,
              " GPU(s) visible)");
}

void init_device(int device) {
  DeviceSlots& s = slots();
  std::call_once(s.once[device], [&] {
    int previous = 0;
    LINEA_CUDA_CHECK(cudaGetDevice(&previous), "cuda");
    LINEA_CUDA_CHECK(cudaSetDevice(device), "cuda", "device ", device);
    // A blocking stream (not cudaStreamNonBlocking): work that someone queues on the legacy
    // default stream still orders with ours instead of racing it.
    cudaStream_t stream = nullptr;
    LINEA_CUDA_CHECK(cudaStreamCreate(&stream), "cuda", "device ", device);
    int sms = 0;
    LINEA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cuda");
    int major = 0;
    LINEA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cuda");
    // Programmatic dependent launch needs sm_90; LINEA_OVERLAP_LAUNCHES=0 turns it off, to measure
    // what it gives or to rule it out when a result looks wrong.
    const char* env = std::getenv("LINEA_OVERLAP_LAUNCHES");
    s.overlaps[device] = major >= 9 && !(env != nullptr && std::string(env) == "0");
    s.streams[device] = stream;
    s.sms[device] = sms;
    LINEA_CUDA_CHECK(cudaSetDevice(previous), "cuda");
  });
}

}  // namespace

cudaStream_t stream_for(int device) {
  check_device(device);
  init_device(device);
  return slots().streams[device];
}

int sm_count(int device) {
  check_device(device);
  init_device(device);
  return slots().sms[device];
}

bool overlaps_launches(int device) {
  check_device(device);
  init_device(device);
  return slots().overlaps[device] != 0;
}

bool kernel_overlaps(const void* kernel, int device) {
  if (!overlaps_launches(device)) return false;
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, bool> known;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto [at, inserted] = known.try_emplace({kernel, device}, false);
  if (inserted) {
    // The attributes are those of the current device's code; use_device() made it `device`.
    cudaFuncAttributes attributes{};
    at->second = cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess && attributes.ptxVersion >= 90;
    cudaGetLastError();
  }
  return at->second;
}

cudaStream_t use_device(int device) {
  check_device(device);
  int current = -1;
  LINEA_CUDA_CHECK(cudaGetDevice(&current), "cuda");
  if (current != device) LINEA_CUDA_CHECK(cudaSetDevice(device), "cuda", "device ", device);
  return stream_for(device);
}

}  // namespace linea::cuda
