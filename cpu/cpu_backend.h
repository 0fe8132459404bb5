#pragma once
// The CPU implementation of the kernel set (tensor/backend.h). Its member functions are defined
// by family: elementwise.cpp (with ReGLA's refined gate), reduce.cpp, matmul.cpp (OpenBLAS),
// indexing.cpp, softmax.cpp, norm.cpp, random.cpp, attention.cpp (with AdamW), gated_scan.cpp,
// normalized_exp.cpp, sample.cpp (generation's draw). Kernels are templates over the element type, instantiated for float and
// double through dispatch_floating.
#include "tensor/backend.h"

namespace linea::cpu {

class CpuBackend final : public Backend {
 public:
#define LINEA_KERNEL(name, ...) void name(__VA_ARGS__) const override;
#include "tensor/backend_kernels.def"
#undef LINEA_KERNEL
};

const Backend& cpu_backend();

// `t` itself when contiguous, else a contiguous copy (same device and dtype).
Tensor contiguous_copy(const Tensor& t);

}  // namespace linea::cpu
