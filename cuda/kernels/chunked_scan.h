#pragma once
// The chunked tensor-core kernels of the gated scan (chunked_scan_kernels.cuh), one precision per
// translation unit so that the three compile in parallel: chunked_scan_tf32.cu (float32 on the
// TF32 tensor cores), chunked_scan_f32.cu (exact float32), chunked_scan_f64.cu (float64).
// chunked_scan.cu picks one for the backend.
#include "cuda/kernels/gated_scan.h"

namespace linea::cuda::chunked {

template <class T, bool kTensorCores>
void forward(const ScanTensors& in, const Tensor& out, const Tensor& final_state, Tensor* kept, int device,
             cudaStream_t stream);
template <class T, bool kTensorCores>
void backward(const ScanTensors& in, const Tensor& dout, const Tensor& dfinal, const ScanGrads& grads,
              const Tensor& kept, int device, cudaStream_t stream);
// Whether the loaded kernels have the TF32 instructions (built for sm_80 or newer).
bool tf32_available();

}  // namespace linea::cuda::chunked
