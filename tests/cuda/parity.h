#pragma once
// Helpers for the CPU-vs-CUDA parity tests: the plain CPU kernel is the oracle, because it is
// simple enough to trust, so every fast CUDA kernel is checked against it.
// Every test starts with LINEA_SKIP_WITHOUT_CUDA(), so without a GPU the suite skips cleanly.
#include <functional>
#include <vector>

#include "cuda/backend.h"
#include "cuda/memory.h"
#include "tests/test_util.h"

namespace linea::testing {

inline Device gpu() { return Device::cuda(0); }

inline Tensor on_gpu(const Tensor& t) { return to(t, gpu()); }

// Normal values of `shape`, reproducible from `seed` (bfloat16: float32 draws, rounded).
inline Tensor random_normal(const Shape& shape, DType dtype, uint64_t seed) {
  Generator gen(seed);
  if (dtype == kBFloat16) return to(randn(shape, kFloat32, &gen), kBFloat16);
  return randn(shape, dtype, &gen);
}

// Tolerances for results computed by different code on the two devices: float64 tight; float32
// at a few ulps of the transcendental functions and of reassociated sums.
inline double parity_rtol(DType dtype) { return dtype == kFloat64 ? 1e-12 : 1e-5; }
inline double parity_atol(DType dtype) { return dtype == kFloat64 ? 1e-12 : 1e-6; }

// The CUDA result (on the GPU, same dtype and shape) agrees with the CPU's.
inline ::testing::AssertionResult matches_cpu(const Tensor& gpu_result, const Tensor& cpu_result, double rtol,
                                              double atol) {
  if (!gpu_result.device().is_cuda())
    return ::testing::AssertionFailure() << "result is on " << gpu_result.device().str() << ", not on the GPU";
  if (gpu_result.dtype() != cpu_result.dtype())
    return ::testing::AssertionFailure() << "dtypes differ: " << gpu_result.describe() << " vs " << cpu_result.describe();
  return all_close(gpu_result, cpu_result, rtol, atol);
}
inline ::testing::AssertionResult matches_cpu(const Tensor& gpu_result, const Tensor& cpu_result) {
  return matches_cpu(gpu_result, cpu_result, parity_rtol(cpu_result.dtype()), parity_atol(cpu_result.dtype()));
}

// Equal values (NaN matching NaN, infinities matching), as bit-exact kernels must give.
inline ::testing::AssertionResult same_values(const Tensor& gpu_result, const Tensor& cpu_result) {
  if (!gpu_result.device().is_cuda())
    return ::testing::AssertionFailure() << "result is on " << gpu_result.device().str() << ", not on the GPU";
  if (gpu_result.dtype() != cpu_result.dtype() || gpu_result.shape() != cpu_result.shape())
    return ::testing::AssertionFailure() << "got " << gpu_result.describe() << ", expected " << cpu_result.describe();
  const auto a = gpu_result.to_vector<double>(), e = cpu_result.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == e[i] || (std::isnan(a[i]) && std::isnan(e[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs expected " << e[i];
  return ::testing::AssertionSuccess();
}

// Sets TF32 on or off for a scope (off: exact float32 GEMMs and attention), restoring it after.
class Tf32Setting {
 public:
  explicit Tf32Setting(bool enabled) : was_(cuda::tf32_enabled()) { cuda::set_tf32(enabled); }
  ~Tf32Setting() { cuda::set_tf32(was_); }
  Tf32Setting(const Tf32Setting&) = delete;
  Tf32Setting& operator=(const Tf32Setting&) = delete;

 private:
  bool was_;
};

class NoTf32 : public Tf32Setting {
 public:
  NoTf32() : Tf32Setting(false) {}
};

// Sets how the chunked scan passes its state between chunks for a scope, restoring it after.
class ScanStatePassSetting {
 public:
  explicit ScanStatePassSetting(cuda::ScanStatePass pass) : was_(cuda::scan_state_pass()) {
    cuda::set_scan_state_pass(pass);
  }
  ~ScanStatePassSetting() { cuda::set_scan_state_pass(was_); }
  ScanStatePassSetting(const ScanStatePassSetting&) = delete;
  ScanStatePassSetting& operator=(const ScanStatePassSetting&) = delete;

 private:
  cuda::ScanStatePass was_;
};

// The most persistent blocks a chained chunked-scan launch runs (cuda::set_scan_persistent_blocks)
// for the setting's lifetime.
class ScanPersistentBlocksSetting {
 public:
  explicit ScanPersistentBlocksSetting(int most) : was_(cuda::scan_persistent_blocks()) {
    cuda::set_scan_persistent_blocks(most);
  }
  ~ScanPersistentBlocksSetting() { cuda::set_scan_persistent_blocks(was_); }
  ScanPersistentBlocksSetting(const ScanPersistentBlocksSetting&) = delete;
  ScanPersistentBlocksSetting& operator=(const ScanPersistentBlocksSetting&) = delete;

 private:
  int was_;
};

// Both of the chunked scan's state passes (kAuto picks one of them), with their names for the
// tests' labels.
struct NamedScanStatePass {
  cuda::ScanStatePass pass;
  const char* name;
};
inline constexpr NamedScanStatePass kScanStatePasses[] = {{cuda::ScanStatePass::kKernels, "state kernels"},
                                                          {cuda::ScanStatePass::kChain, "state chain"}};
inline const char* scan_state_pass_name() {
  for (const NamedScanStatePass& p : kScanStatePasses)
    if (p.pass == cuda::scan_state_pass()) return p.name;
  return "state auto";
}

}  // namespace linea::testing
