// LayerNorm and RMSNorm over the last dim, forward and backward, rows in parallel. Statistics
// are computed in double and saved (mean, 1/std) so backward does not recompute them.
// bfloat16: activations (x, y, dy, dx) may be bfloat16, or x float32 and y bfloat16
// (dispatch_in_out); the weight, the bias, their gradients and the saved statistics are then
// float32 (compute_dtype), and every element is computed in double and rounded once.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"

namespace linea::cpu {

namespace {

// An activation element as double (bfloat16 and float32 widen exactly).
template <class T>
double widen(T v) {
  return static_cast<double>(static_cast<compute_t<T>>(v));
}

int64_t row_grain(int64_t cols) { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(cols, 1)); }

// An optional (C) parameter (a norm's weight or bias), contiguous; undefined stays undefined.
Tensor contiguous_or_none(const Tensor& t) { return t.defined() ? contiguous_copy(t) : t; }

// A norm backward's rows, of x and dy (contiguous, rows x cols): row_fn(r, x_row, dy_row,
// param_grads) computes row r's dx and adds the row's contributions to the (C) parameter
// gradients into param_grads (one block of cols per entry of targets), which are summed into
// targets (null: not wanted). Each thread keeps its own partial sums, added in a fixed order at
// the end, so the result does not depend on scheduling. With no target wanted, param_grads is
// null and the rows just run in parallel.
template <class X, class Y, class P, class RowFn>
void backward_rows(const X* x, const Y* dy, int64_t rows, int64_t cols, RowFn row_fn, const std::vector<P*>& targets) {
  const auto run_row = [&](int64_t r, double* param_grads) { row_fn(r, x + r * cols, dy + r * cols, param_grads); };
  if (std::all_of(targets.begin(), targets.end(), [](P* t) { return t == nullptr; })) {
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
      targets[k][j] = static_cast<P>(total);
    }
  }
}

// Both norms' backward: LayerNorm's with `mean` (and dbias), RMSNorm's without, mu = 0. The
// forward was xhat = (x - mu) * rstd, y = xhat * w (+ b), so with g = dy * w:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (RMSNorm: no mean(g) term)
//   dw = sum_rows dy * xhat,  db = sum_rows dy.
// RMSNorm's terms come out bit for bit as a formula of its own would give them (x - 0 and g - 0
// are exact). dweight, dbias: undefined where not wanted.
void norm_backward(const char* op, const Tensor& x_, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                   const Tensor& dy_, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const Tensor x = contiguous_copy(x_), dy = contiguous_copy(dy_), w_t = contiguous_or_none(weight);
  const auto [rows, cols] = rows_cols(x.shape());
  const bool centered = mean.defined();
  dispatch_in_out(x.dtype(), dy.dtype(), op, [&]<class X, class Y>() {
    using P = compute_t<X>;
    const P* w = data_or_null<P>(w_t);
    const P* pmean = data_or_null<P>(mean);
    const P* prstd = rstd.data<P>();
    X* pdx = dx.data<X>();
    auto row_fn = [&](int64_t r, const X* row, const Y* g_row, double* param_grads) {
      const double mu = centered ? static_cast<double>(pmean[r]) : 0.0, rs = prstd[r];
      double mean_g = 0, mean_gx = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double d = widen(g_row[j]), g = d * (w ? w[j] : P(1)), xhat = (widen(row[j]) - mu) * rs;
        if (centered) mean_g += g;
        mean_gx += g * xhat;
        if (param_grads) {
          param_grads[j] += d * xhat;
          if (centered) param_grads[cols + j] += d;
        }
      }
      mean_g /= cols;
      mean_gx /= cols;
      X* out = pdx + r * cols;
      for (int64_t j = 0; j < cols; ++j) {
        const double g = widen(g_row[j]) * (w ? w[j] : P(1)), xhat = (widen(row[j]) - mu) * rs;
        out[j] = static_cast<X>(rs * (g - mean_g - xhat * mean_gx));
      }
    };
    std::vector<P*> targets{data_or_null<P>(dweight)};
    if (centered) targets.push_back(data_or_null<P>(dbias));
    backward_rows<X, Y, P>(x.data<X>(), dy.data<Y>(), rows, cols, row_fn, targets);
  });
}

}  // namespace

void CpuBackend::layer_norm(const Tensor& x_, const Tensor& weight, const Tensor& bias, double eps,
                            const Tensor& y, const Tensor& mean, const Tensor& rstd) const {
  const Tensor x = contiguous_copy(x_), w_t = contiguous_or_none(weight), b_t = contiguous_or_none(bias);
  const auto [rows, cols] = rows_cols(x.shape());
  dispatch_in_out(x.dtype(), y.dtype(), "layer_norm", [&]<class X, class Y>() {
    using P = compute_t<X>;
    const X* px = x.data<X>();
    const P* w = data_or_null<P>(w_t);
    const P* b = data_or_null<P>(b_t);
    P* pmean = mean.data<P>();
    P* prstd = rstd.data<P>();
    Y* py = y.data<Y>();
    parallel_for(rows, row_grain(cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const X* row = px + r * cols;
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < cols; ++j) sum += widen(row[j]);
        const double mu = sum / cols;
        for (int64_t j = 0; j < cols; ++j) sq += (widen(row[j]) - mu) * (widen(row[j]) - mu);
        const double rs = 1.0 / std::sqrt(sq / cols + eps);
        pmean[r] = static_cast<P>(mu);
        prstd[r] = static_cast<P>(rs);
        Y* out = py + r * cols;
        for (int64_t j = 0; j < cols; ++j) {
          double v = (widen(row[j]) - mu) * rs;
          if (w) v *= w[j];
          if (b) v += b[j];
          out[j] = static_cast<Y>(v);
        }
      }
    });
  });
}

void CpuBackend::layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& dy, const Tensor& dx,
                                     const Tensor& dweight, const Tensor& dbias, const Tensor& dx_add) const {
  norm_backward("layer_norm_backward", x, weight, mean, rstd, dy, dx, dweight, dbias);
  if (dx_add.defined()) binary(BinaryOp::Add, dx, dx_add, dx);
}

void CpuBackend::rms_norm(const Tensor& x_, const Tensor& weight, double eps, const Tensor& y,
                          const Tensor& rstd) const {
  const Tensor x = contiguous_copy(x_), w_t = contiguous_or_none(weight);
  const auto [rows, cols] = rows_cols(x.shape());
  dispatch_in_out(x.dtype(), y.dtype(), "rms_norm", [&]<class X, class Y>() {
    using P = compute_t<X>;
    const X* px = x.data<X>();
    const P* w = data_or_null<P>(w_t);
    P* prstd = rstd.data<P>();
    Y* py = y.data<Y>();
    parallel_for(rows, row_grain(cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const X* row = px + r * cols;
        double sq = 0;
        for (int64_t j = 0; j < cols; ++j) sq += widen(row[j]) * widen(row[j]);
        const double rs = 1.0 / std::sqrt(sq / cols + eps);
        prstd[r] = static_cast<P>(rs);
        Y* out = py + r * cols;
        for (int64_t j = 0; j < cols; ++j) out[j] = static_cast<Y>(widen(row[j]) * rs * (w ? w[j] : P(1)));
      }
    });
  });
}

void CpuBackend::rms_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& rstd,
                                   const Tensor& dy, const Tensor& dx, const Tensor& dweight,
                                   const Tensor& dx_add) const {
  norm_backward("rms_norm_backward", x, weight, Tensor(), rstd, dy, dx, dweight, Tensor());
  if (dx_add.defined()) binary(BinaryOp::Add, dx, dx_add, dx);
}

}  // namespace linea::cpu
