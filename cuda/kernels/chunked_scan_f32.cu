// The chunked gated-scan kernels (chunked_scan_kernels.cuh) in exact float32 (TF32 off).
#include "cuda/kernels/chunked_scan_kernels.cuh"

LINEA_CHUNKED_SCAN_INSTANCE(float, kExact)
