#pragma once
// Where the rows of a (B, H, T, d) tensor with a contiguous last dim start in memory, for the
// kernels that walk each (batch, head) sequence row by row on either backend
// (cpu/normalized_exp.cpp, cuda/kernels/normalized_exp.cu). The layers hand over
// (B, T, H, d) projections seen as (B, H, T, d), so the rows of one sequence are not adjacent:
// they are found through the strides of the three leading dims.
#include <cstdint>

#include "tensor/host_device.h"
#include "tensor/tensor.h"

namespace linea {

struct SequenceRows {
  int64_t heads;                   // H: sequence s is (b, h) = (s / H, s % H)
  int64_t batch_stride, head_stride, time_stride;

  // Offset (in elements) of row t of sequence s.
  LINEA_HD int64_t at(int64_t s, int64_t t) const {
    return (s / heads) * batch_stride + (s % heads) * head_stride + t * time_stride;
  }
};

inline SequenceRows sequence_rows(const Tensor& x) { return {x.size(1), x.stride(0), x.stride(1), x.stride(2)}; }

}  // namespace linea
