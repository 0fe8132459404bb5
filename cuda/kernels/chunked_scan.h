#pragma once
// The chunked tensor-core kernels of the gated scan (chunked_scan_kernels.cuh), one precision per
// translation unit so that the four compile in parallel: chunked_scan_tf32.cu (float32 on the
// TF32 tensor cores), chunked_scan_bf16.cu (the bfloat16 scan: bfloat16 tensors read and written
// in place, float32 tiles, products on the bfloat16 tensor cores), chunked_scan_f32.cu (exact
// float32), chunked_scan_f64.cu (float64).
// chunked_scan.cu picks one for the backend.
#include "cuda/kernels/gated_scan.h"

namespace linea::cuda::chunked {

// How the kernels' matrix products run (chunked_scan.cuh: warp_product). Every way accumulates in
// the element type (float32 on the tensor cores) and keeps the states, decays and elementwise terms
// in it; only the products' operands are rounded, to TF32 (10 mantissa bits) or bfloat16 (7).
enum class Products {
  kExact,  // fused multiply-adds in the element type (float32 with TF32 off, float64)
  kTF32,   // mma.sync m16n8k8, operands rounded to TF32
  kBF16,   // mma.sync m16n8k16, operands rounded to bfloat16 (twice TF32's rate)
};

template <class T, Products kProducts>
void forward(const ScanTensors& in, const Tensor& out, const Tensor& final_state, Tensor* kept, int device,
             cudaStream_t stream);
template <class T, Products kProducts>
void backward(const ScanTensors& in, const Tensor& dout, const Tensor& dfinal, const ScanGrads& grads,
              const Tensor& kept, int device, cudaStream_t stream);
// Whether the loaded kernels have the TF32 instructions (built for sm_80 or newer).
bool tf32_available();

}  // namespace linea::cuda::chunked
