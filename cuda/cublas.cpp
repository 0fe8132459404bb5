// cuBLAS handles and the TF32 switch.
#include "cuda/cublas.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda/backend.h"
#include "cuda/check.h"
#include "cuda/memory.h"
#include "cuda/stream.h"

namespace linea::cuda {

const char* cublas_status_string(int status) { return cublasGetStatusString(static_cast<cublasStatus_t>(status)); }

namespace {

// -1 until first asked: then LINEA_TF32 decides (anything but "0" means on).
std::atomic<int> g_tf32{-1};

struct Handles {
  std::unique_ptr<std::once_flag[]> once;
  std::vector<cublasHandle_t> handles;
};

Handles& handles() {
  static Handles* h = [] {  // never destroyed, like the streams the handles are bound to
    auto* all = new Handles;
    const int count = device_count();
    all->once = std::make_unique<std::once_flag[]>(count > 0 ? count : 1);
    all->handles.assign(count, nullptr);
    return all;
  }();
  return *h;
}

}  // namespace

void set_tf32(bool enabled) { g_tf32.store(enabled ? 1 : 0); }

bool tf32_enabled() {
  int state = g_tf32.load();
  if (state < 0) {
    const char* env = std::getenv("LINEA_TF32");
    const int from_env = env != nullptr && std::strcmp(env, "0") == 0 ? 0 : 1;
    g_tf32.compare_exchange_strong(state, from_env);  // a concurrent set_tf32 wins
    state = g_tf32.load();
  }
  return state == 1;
}

cublasHandle_t cublas_handle(int device) {
  const cudaStream_t stream = use_device(device);  // also checks that the device exists
  Handles& h = handles();
  std::call_once(h.once[device], [&] {
    cublasHandle_t handle = nullptr;
    LINEA_CUBLAS_CHECK(cublasCreate(&handle), "matmul", "cuda:", device);
    LINEA_CUBLAS_CHECK(cublasSetStream(handle, stream), "matmul", "cuda:", device);
    // A bfloat16 product accumulates in float32 all the way: cuBLAS may otherwise add split-K
    // partial sums in the output's bfloat16, which the error bound (and the tests) rule out.
    LINEA_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION), "matmul",
                       "cuda:", device);
    h.handles[device] = handle;
  });
  return h.handles[device];
}

}  // namespace linea::cuda
