// The chunked gated-scan kernels (chunked_scan_kernels.cuh) in float64.
#include "cuda/kernels/chunked_scan_kernels.cuh"

namespace linea::cuda::chunked {

template void forward<double, Products::kExact>(const ScanTensors&, const Tensor&, const Tensor&, Tensor*, int,
                                                cudaStream_t);
template void backward<double, Products::kExact>(const ScanTensors&, const Tensor&, const Tensor&, const ScanGrads&,
                                                 const Tensor&, int, cudaStream_t);

}  // namespace linea::cuda::chunked
