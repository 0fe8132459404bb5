// LayerNorm and RMSNorm over the last dim, forward and backward, rows in parallel. Statistics
// are computed in double and saved (mean, 1/std) so backward does not recompute them.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"

namespace linea::cpu {

namespace {

int64_t row_grain(int64_t cols) { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(cols, 1)); }

// An optional (C) parameter (a norm's weight or bias), contiguous; undefined stays undefined.
Tensor contiguous_or_none(const Tensor& t) { return t.defined() ? contiguous_copy(t) : t; }

// A norm backward's rows, of x and dy (contiguous, rows x cols): row_fn(r, x_row, dy_row,
// param_grads) computes row r's dx and adds the row's contributions to the (C) parameter
// gradients into param_grads (one block of cols per entry of targets), which are summed into
// targets (null: not wanted). Each thread keeps its own partial sums, added in a fixed order at
// the end, so the result does not depend on scheduling. With no target wanted, param_grads is
// null and the rows just run in parallel.
template <class T, class RowFn>
void backward_rows(const T* x, const T* dy, int64_t rows, int64_t cols, RowFn row_fn, const std::vector<T*>& targets) {
  const auto run_row = [&](int64_t r, double* param_grads) { row_fn(r, x + r * cols, dy + r * cols, param_grads); };
  if (std::all_of(targets.begin(), targets.end(), [](T* t) { return t == nullptr; })) {
    parallel_for(rows, row_grain(cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) run_row(r, nullptr);
    });
    return;
  }
  const int outputs = static_cast<int>(targets.size());
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(num_threads(), rows));
  std::vector<std::vector<double>> partial(chunks, std::vector<double>(outputs * cols, 0.0));
  parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c)
      for (int64_t r = rows * c / chunks; r < rows * (c + 1) / chunks; ++r) run_row(r, partial[c].data());
  });
  for (int k = 0; k < outputs; ++k) {
    if (targets[k] == nullptr) continue;
    for (int64_t j = 0; j < cols; ++j) {
      double total = 0;
      for (int64_t c = 0; c < chunks; ++c) total += partial[c][k * cols + j];
      targets[k][j] = static_cast<T>(total);
    }
  }
}

}  // namespace

void CpuBackend::layer_norm(const Tensor& x_, const Tensor& weight, const Tensor& bias, double eps,
                            const Tensor& y, const Tensor& mean, const Tensor& rstd) const {
  const Tensor x = contiguous_copy(x_), w_t = contiguous_or_none(weight), b_t = contiguous_or_none(bias);
  const auto [rows, cols] = rows_cols(x.shape());
  dispatch_floating(x.dtype(), "layer_norm", [&]<class T>() {
    const T* px = x.data<T>();
    const T* w = data_or_null<T>(w_t);
    const T* b = data_or_null<T>(b_t);
    parallel_for(rows, row_grain(cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* row = px + r * cols;
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < cols; ++j) sum += row[j];
        const double mu = sum / cols;
        for (int64_t j = 0; j < cols; ++j) sq += (row[j] - mu) * (row[j] - mu);
        const double rs = 1.0 / std::sqrt(sq / cols + eps);
        mean.data<T>()[r] = static_cast<T>(mu);
        rstd.data<T>()[r] = static_cast<T>(rs);
        T* out = y.data<T>() + r * cols;
        for (int64_t j = 0; j < cols; ++j) {
          double v = (row[j] - mu) * rs;
          if (w) v *= w[j];
          if (b) v += b[j];
          out[j] = static_cast<T>(v);
        }
      }
    });
  });
}

void CpuBackend::layer_norm_backward(const Tensor& x_, const Tensor& weight, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& dy_, const Tensor& dx,
                                     const Tensor& dweight, const Tensor& dbias, const Tensor& dx_add) const {
  const Tensor x = contiguous_copy(x_), dy = contiguous_copy(dy_), w_t = contiguous_or_none(weight);
  const auto [rows, cols] = rows_cols(x.shape());
  dispatch_floating(x.dtype(), "layer_norm_backward", [&]<class T>() {
    const T* w = data_or_null<T>(w_t);
    // forward was xhat = (x - mu) * rstd, y = xhat * w + b, so with g = dy * w:
    //   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dw = sum_rows dy * xhat,  db = sum_rows dy.
    auto row_fn = [&](int64_t r, const T* row, const T* g_row, double* param_grads) {
      const double mu = mean.data<T>()[r], rs = rstd.data<T>()[r];
      double mean_g = 0, mean_gx = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double g = g_row[j] * (w ? w[j] : T(1)), xhat = (row[j] - mu) * rs;
        mean_g += g;
        mean_gx += g * xhat;
        if (param_grads) {
          param_grads[j] += g_row[j] * xhat;
          param_grads[cols + j] += g_row[j];
        }
      }
      mean_g /= cols;
      mean_gx /= cols;
      T* out = dx.data<T>() + r * cols;
      for (int64_t j = 0; j < cols; ++j) {
        const double g = g_row[j] * (w ? w[j] : T(1)), xhat = (row[j] - mu) * rs;
        out[j] = static_cast<T>(rs * (g - mean_g - xhat * mean_gx));
      }
    };
    backward_rows<T>(x.data<T>(), dy.data<T>(), rows, cols, row_fn,
                     {data_or_null<T>(dweight), data_or_null<T>(dbias)});
  });
  if (dx_add.defined()) binary(BinaryOp::Add, dx, dx_add, dx);
}

void CpuBackend::rms_norm(const Tensor& x_, const Tensor& weight, double eps, const Tensor& y,
                          const Tensor& rstd) const {
  const Tensor x = contiguous_copy(x_), w_t = contiguous_or_none(weight);
  const auto [rows, cols] = rows_cols(x.shape());
  dispatch_floating(x.dtype(), "rms_norm", [&]<class T>() {
    const T* px = x.data<T>();
    const T* w = data_or_null<T>(w_t);
    parallel_for(rows, row_grain(cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* row = px + r * cols;
        double sq = 0;
        for (int64_t j = 0; j < cols; ++j) sq += static_cast<double>(row[j]) * row[j];
        const double rs = 1.0 / std::sqrt(sq / cols + eps);
        rstd.data<T>()[r] = static_cast<T>(rs);
        T* out = y.data<T>() + r * cols;
        for (int64_t j = 0; j < cols; ++j) out[j] = static_cast<T>(row[j] * rs * (w ? w[j] : T(1)));
      }
    });
  });
}

void CpuBackend::rms_norm_backward(const Tensor& x_, const Tensor& weight, const Tensor& rstd,
                                   const Tensor& dy_, const Tensor& dx, const Tensor& dweight,
                                   const Tensor& dx_add) const {
  const Tensor x = contiguous_copy(x_), dy = contiguous_copy(dy_), w_t = contiguous_or_none(weight);
  const auto [rows, cols] = rows_cols(x.shape());
  dispatch_floating(x.dtype(), "rms_norm_backward", [&]<class T>() {
    const T* w = data_or_null<T>(w_t);
    // forward was xhat = x * rstd, y = xhat * w, so with g = dy * w:
    //   dx = rstd * (g - xhat * mean(g * xhat)),  dw = sum_rows dy * xhat.
    auto row_fn = [&](int64_t r, const T* row, const T* g_row, double* param_grads) {
      const double rs = rstd.data<T>()[r];
      double mean_gx = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double xhat = row[j] * rs;
        mean_gx += g_row[j] * (w ? w[j] : T(1)) * xhat;
        if (param_grads) param_grads[j] += g_row[j] * xhat;
      }
      mean_gx /= cols;
      T* out = dx.data<T>() + r * cols;
      for (int64_t j = 0; j < cols; ++j)
        out[j] = static_cast<T>(rs * (g_row[j] * (w ? w[j] : T(1)) - row[j] * rs * mean_gx));
    };
    backward_rows<T>(x.data<T>(), dy.data<T>(), rows, cols, row_fn, {data_or_null<T>(dweight)});
  });
  if (dx_add.defined()) binary(BinaryOp::Add, dx, dx_add, dx);
}

}  // namespace linea::cpu
