#pragma once
// What the stand-alone GPU probes of tools/gpu/ share: a status check that names the failing call,
// a timer, and device buffers of non-trivial values.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

// Exits with the call and line when a CUDA, cuBLAS or cublasLt call does not return success (0).
#define CHECK(call)                                                                         \
  do {                                                                                      \
    const auto status = (call);                                                             \
    if (static_cast<int>(status) != 0) {                                                    \
      std::printf("%s failed (%d), line %d\n", #call, static_cast<int>(status), __LINE__); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

// Mean microseconds of `work` over `repeats` calls after two warm-up calls.
inline double time_us(const std::function<void()>& work, int repeats = 20) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  work();
  work();
  CHECK(cudaEventRecord(start));
  for (int i = 0; i < repeats; ++i) work();
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  return 1000.0 * ms / repeats;
}

// `count` floats on the device, spread over [-0.5, 0.5) by a multiplicative hash of the index.
inline float* filled(size_t count) {
  float* p = nullptr;
  CHECK(cudaMalloc(&p, count * sizeof(float)));
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  CHECK(cudaMemcpy(p, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  return p;
}

// The largest |a[i] - b[i]| over n device floats.
inline float max_abs_diff(const float* a, const float* b, size_t n) {
  std::vector<float> x(n), y(n);
  CHECK(cudaMemcpy(x.data(), a, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(y.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost));
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}
