// The chunked gated-scan kernels (chunked_scan_kernels.cuh) in float64.
#include "cuda/kernels/chunked_scan_kernels.cuh"

LINEA_CHUNKED_SCAN_INSTANCE(double, kExact)
