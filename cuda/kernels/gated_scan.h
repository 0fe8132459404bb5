#pragma once
// The two CUDA implementations of the gated linear attention scan (tensor/backend.h: gated_scan),
// between which CudaBackend::gated_scan (gated_scan.cu) chooses by ScanAlgorithm:
//   chunked_scan.cu   the chunked form with its products on the tensor cores (the default);
//   gated_scan.cu     the sequential recurrence, one step at a time (SIMT).
// Both take the backend's arguments (inputs of any strides; outputs as autograd allocates them).
#include <cuda_runtime.h>

#include "tensor/tensor.h"

namespace linea::cuda {

struct ScanTensors {
  const Tensor &q, &k, &v, &gk, &gv, &s0;
};
struct ScanGrads {
  const Tensor &dq, &dk, &dv, &dgk, &dgv, &dinitial;
};

// Sets the q, k, v, gk and gv of a kernel's arguments `a` to view(x) of the same-named tensors of
// `in`: the recurrence's five inputs, as the chunked scan (ScanTensors) and the decoding step
// (tensor/backend.h: LinearStepInputs, linear_step.cu) hand them to their kernels.
template <class Args, class Inputs, class View>
void set_recurrence_inputs(Args& a, const Inputs& in, View&& view) {
  a.q = view(in.q);
  a.k = view(in.k);
  a.v = view(in.v);
  a.gk = view(in.gk);
  a.gv = view(in.gv);
}

// kept (not null): receives the states before every chunk, which chunked_scan_backward then reads
// instead of recomputing them (chunked_scan_kernels.cuh: Memory). A bfloat16 scan's q, k, v, dout
// and results are bfloat16 (the kernels widen them as they load them and round as they store),
// its products on the bfloat16 tensor cores.
void chunked_scan_forward(const ScanTensors& in, const Tensor& out, const Tensor& final_state, Tensor* kept,
                          int device, cudaStream_t stream);
void chunked_scan_backward(const ScanTensors& in, const Tensor& dout, const Tensor& dfinal, const ScanGrads& grads,
                           const Tensor& kept, int device, cudaStream_t stream);
// Whether the loaded chunked kernels have the TF32 instructions (built for sm_80 or newer).
bool chunked_scan_tf32_available();

}  // namespace linea::cuda
