// The chunked gated-scan kernels (chunked_scan_kernels.cuh) of a bfloat16 scan: bfloat16 q, k, v,
// dout read (and o, dq, dk, dv written) in place, float32 tiles, states and decays, the products'
// operands rounded to bfloat16 for the m16n8k16 tensor cores.
#include "cuda/kernels/chunked_scan_kernels.cuh"

LINEA_CHUNKED_SCAN_INSTANCE(float, kBF16)
