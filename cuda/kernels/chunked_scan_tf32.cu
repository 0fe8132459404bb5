// The chunked gated-scan kernels (chunked_scan_kernels.cuh) in float32 on the TF32 tensor cores.
#include "cuda/kernels/chunked_scan_kernels.cuh"

LINEA_CHUNKED_SCAN_INSTANCE(float, kTF32)

namespace linea::cuda::chunked {

bool tf32_available() {
  // The PTX the loaded kernels came from: compute_80 or newer has the mma instructions.
  static const bool available = [] {
    cudaFuncAttributes attributes{};
    const auto kernel = chunk_output_kernel<float, Products::kTF32, false, false>;
    return cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess && attributes.ptxVersion >= 80;
  }();
  return available;
}

}  // namespace linea::cuda::chunked
