// cuBLAS opened at first use, its handles, and the TF32 switch.
#include "cuda/cublas.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/backend.h"
#include "cuda/check.h"
#include "cuda/memory.h"
#include "cuda/stream.h"

namespace linea::cuda {

namespace {

template <class Function>
void resolve(void* library, const std::string& name, const char* symbol, Function& function) {
  function = reinterpret_cast<Function>(dlsym(library, symbol));
  if (function == nullptr)
    fail("matmul", name, " has no ", symbol, ": not cuBLAS, or older than the headers linea was built with");
}

// cuBLAS by its versioned name (the one the headers were written for), through the loader's usual
// search, then in the CUDA Toolkit's folder this build found it in (LINEA_CUBLAS_DIR, set by
// CMakeLists.txt), for a program whose run path does not name that folder.
std::vector<std::string> cublas_candidates() {
  const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::vector<std::string> candidates{name};
#ifdef LINEA_CUBLAS_DIR
  candidates.push_back(std::string(LINEA_CUBLAS_DIR) + "/" + name);
#endif
  return candidates;
}

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

Cublas open_cublas(const std::vector<std::string>& candidates) {
  std::string reasons;
  for (const std::string& candidate : candidates) {
    void* library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);  // cuBLAS stays open for good
    if (library == nullptr) {
      const char* reason = dlerror();
      reasons += (reasons.empty() ? "" : "; ") + std::string(reason != nullptr ? reason : candidate + ": not loaded");
      continue;
    }
    Cublas api;
    try {
      resolve(library, candidate, "cublasCreate_v2", api.create);
      resolve(library, candidate, "cublasSetStream_v2", api.set_stream);
      resolve(library, candidate, "cublasSetMathMode", api.set_math_mode);
      resolve(library, candidate, "cublasGemmStridedBatchedEx_64", api.gemm_strided_batched);
      resolve(library, candidate, "cublasSgeam", api.sgeam);
      resolve(library, candidate, "cublasGetStatusString", api.status_string);
    } catch (...) {
      dlclose(library);
      throw;
    }
    return api;
  }
  fail("matmul", "cannot load cuBLAS, which every product on the GPU needs: ", reasons,
       " (is the CUDA Toolkit's library folder on LD_LIBRARY_PATH?)");
}

const Cublas& cublas() {
  static const Cublas api = open_cublas(cublas_candidates());  // a throw leaves it unset: the next call retries
  return api;
}

// Called only for the status of a cuBLAS call, so the library is open.
const char* cublas_status_string(int status) { return cublas().status_string(static_cast<cublasStatus_t>(status)); }

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
    const Cublas& api = cublas();
    LINEA_CUBLAS_CHECK(api.create(&handle), "matmul", "cuda:", device);
    LINEA_CUBLAS_CHECK(api.set_stream(handle, stream), "matmul", "cuda:", device);
    // A bfloat16 product accumulates in float32 all the way: cuBLAS may otherwise add split-K
    // partial sums in the output's bfloat16, which the error bound (and the tests) rule out.
    LINEA_CUBLAS_CHECK(api.set_math_mode(handle, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION), "matmul",
                       "cuda:", device);
    h.handles[device] = handle;
  });
  return h.handles[device];
}

}  // namespace linea::cuda
