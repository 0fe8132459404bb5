// Streams and per-device facts, created once per device on first use and kept for the process.
#include "cuda/stream.h"

#include <memory>
#include <mutex>
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

cudaStream_t use_device(int device) {
  check_device(device);
  int current = -1;
  LINEA_CUDA_CHECK(cudaGetDevice(&current), "cuda");
  if (current != device) LINEA_CUDA_CHECK(cudaSetDevice(device), "cuda", "device ", device);
  return stream_for(device);
}

}  // namespace linea::cuda
