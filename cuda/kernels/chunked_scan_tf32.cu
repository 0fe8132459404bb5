// The chunked gated-scan kernels (chunked_scan_kernels.cuh) in float32 on the TF32 tensor cores.
#include "cuda/kernels/chunked_scan_kernels.cuh"

namespace linea::cuda::chunked {

template void forward<float, Products::kTF32>(const ScanTensors&, const Tensor&, const Tensor&, Tensor*, int,
                                              cudaStream_t);
template void backward<float, Products::kTF32>(const ScanTensors&, const Tensor&, const Tensor&, const ScanGrads&,
                                               const Tensor&, int, cudaStream_t);

bool tf32_available() {
  // The PTX the loaded kernels came from: compute_80 or newer has the mma instructions.
  static const bool available = [] {
    cudaFuncAttributes attributes{};
    return cudaFuncGetAttributes(&attributes, chunk_output_kernel<float, Products::kTF32>) == cudaSuccess &&
           attributes.ptxVersion >= 80;
  }();
  return available;
}

}  // namespace linea::cuda::chunked
