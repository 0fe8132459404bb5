// A decoding step's matrix product with its input norm, activation and residual folded in
// (tensor/backend_kernels.def: fused_linear): the CPU kernel and the oracle of the CUDA one. The
// rows are normed into a scratch copy (the statistics in double, as cpu/norm.cpp computes them),
// OpenBLAS takes the product, and one pass over the result applies the epilogue in the contract's
// order.
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/gemm.h"
#include "cpu/parallel.h"
#include "tensor/fused_linear_math.h"

namespace linea::cpu {

namespace {

// x's rows through the norm, into a dense (rows, width) copy.
template <class T>
std::vector<T> normed_rows(const Tensor& x, const FusedLinearInputs& in, const FusedLinearOptions& options) {
  const int64_t rows = x.size(0), width = x.size(1), stride = x.stride(0);
  const T* gain = data_or_null<T>(in.norm_weight);
  const T* shift = data_or_null<T>(in.norm_bias);
  std::vector<T> normed(rows * width);
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x.data<T>() + r * stride;
    T* dst = normed.data() + r * width;
    if (options.norm == RowNorm::None) {
      std::copy(row, row + width, dst);
      continue;
    }
    double mean = 0, sq = 0;
    if (options.norm == RowNorm::Layer) {
      for (int64_t c = 0; c < width; ++c) mean += row[c];
      mean /= width;
    }
    for (int64_t c = 0; c < width; ++c) sq += (row[c] - mean) * (row[c] - mean);
    const double rstd = norm_rstd(sq, static_cast<double>(width), options.norm_eps);
    for (int64_t c = 0; c < width; ++c) dst[c] = normed_value(row[c], mean, rstd, gain, shift, c);
  }
  return normed;
}

}  // namespace

void CpuBackend::fused_linear(const FusedLinearInputs& in, const FusedLinearOptions& options, const Tensor& out) const {
  const int64_t rows = in.x.size(0), width = in.x.size(1), outputs = in.weight.size(0);
  if (rows == 0 || outputs == 0) return;
  dispatch_floating(in.x.dtype(), "fused_linear", [&]<class T>() {
    const std::vector<T> normed = normed_rows<T>(in.x, in, options);
    T* y = out.data<T>();
    if (width == 0) std::fill(y, y + rows * outputs, T(0));
    else gemm<T>(CblasNoTrans, CblasTrans, rows, outputs, width, normed.data(), width, in.weight.data<T>(), width, y,
                 outputs);
    std::vector<T> up;
    if (in.up_weight.defined()) {
      up.assign(rows * outputs, T(0));
      if (width > 0)
        gemm<T>(CblasNoTrans, CblasTrans, rows, outputs, width, normed.data(), width, in.up_weight.data<T>(), width,
                up.data(), outputs);
    }
    const T* bias = data_or_null<T>(in.bias);
    const T* up_bias = data_or_null<T>(in.up_bias);
    const T* residual = data_or_null<T>(in.residual);
    const int64_t residual_stride = in.residual.defined() ? in.residual.stride(0) : 0;
    parallel_for(rows * outputs, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t r = i / outputs, j = i % outputs;
        T v = y[i] + (bias ? bias[j] : T(0));
        if (options.activate) v = activation_value(options.activation, v);
        if (!up.empty()) v *= up[i] + (up_bias ? up_bias[j] : T(0));
        if (residual) v += residual[r * residual_stride + j];
        y[i] = v;
      }
    });
  });
}

}  // namespace linea::cpu
