#pragma once
// The CUDA implementation of the kernel set (tensor/backend.h), one instance per device. Its
// member functions are defined by family, one file each under cuda/kernels/: elementwise.cu
// (with ReGLA's refined gate), reduce.cu, matmul.cpp (cuBLAS), indexing.cu, random.cu, softmax.cu,
// cross_entropy.cu, norm.cu, attention.cu (FlashAttention-style), gated_scan.cu, adamw.cu,
// normalized_exp.cu, sample.cu (generation's draw). Every kernel runs on the
// device's stream (cuda/stream.h: each entry point starts with use_device(device_)), in float32
// (float64 where a kernel supports it: tests run both), and every launch and library call is checked
// (cuda/check.h, cuda/launch.cuh). Scratch memory comes from cuda/buffer.h.
#include "tensor/backend.h"

namespace linea::cuda {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {}
  int device() const { return device_; }

#define LINEA_KERNEL(name, ...) void name(__VA_ARGS__) const override;
#include "tensor/backend_kernels.def"
#undef LINEA_KERNEL

 private:
  int device_;
};

// `t` itself when contiguous, else a contiguous copy on its device (the twin of
// cpu::contiguous_copy), for kernels that read plain rows.
Tensor contiguous_copy(const Tensor& t);

}  // namespace linea::cuda
