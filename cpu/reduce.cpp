// Reductions and cumulative sums on the CPU. Float sums accumulate in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"
#include "tensor/scalar_math.h"
#include "tensor/widen.h"

namespace linea::cpu {

namespace {

template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;

// Reduces each row of a contiguous (rows, len) block into one value.
template <class T>
void reduce_rows(ReduceOp op, const T* x, int64_t rows, int64_t len, const Tensor& out) {
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(len, 1));
  parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* row = x + r * len;
      switch (op) {
        case ReduceOp::Sum: {
          Acc<T> acc = 0;
          for (int64_t i = 0; i < len; ++i) acc += row[i];
          out.data<T>()[r] = static_cast<T>(acc);
          break;
        }
        case ReduceOp::Max:
        case ReduceOp::Min: {
          T best = row[0];
          for (int64_t i = 1; i < len; ++i)
            best = op == ReduceOp::Max ? scalar::max_nan(best, row[i]) : scalar::min_nan(best, row[i]);
          out.data<T>()[r] = best;
          break;
        }
        case ReduceOp::ArgMax:
        case ReduceOp::ArgMin: {
          // First position of the extreme value; a NaN counts as the extreme, like max().
          int64_t best = 0;
          for (int64_t i = 1; i < len; ++i) {
            const T v = row[i], b = row[best];
            if (b != b) break;
            const bool better = (v != v) || (op == ReduceOp::ArgMax ? v > b : v < b);
            if (better) best = i;
          }
          out.data<int64_t>()[r] = best;
          break;
        }
      }
    }
  });
}

// Sums over the leading `rows` of a contiguous (rows, cols) block: column sums, vectorized along
// the contiguous columns; the common case of a bias gradient, which would otherwise need a
// transposing copy.
template <class T>
void sum_columns(const T* x, int64_t rows, int64_t cols, T* out) {
  const int64_t grain = std::max<int64_t>(16, kElementwiseGrain / std::max<int64_t>(rows, 1));
  parallel_for(cols, grain, [&](int64_t begin, int64_t end) {
    std::vector<Acc<T>> acc(end - begin, Acc<T>(0));
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * cols + begin;
      for (int64_t c = 0; c < end - begin; ++c) acc[c] += row[c];
    }
    for (int64_t c = begin; c < end; ++c) out[c] = static_cast<T>(acc[c - begin]);
  });
}

// A whole-tensor sum/max/min: one long row, split across threads into partial results.
template <class T>
bool reduce_one_long_row(ReduceOp op, const T* x, int64_t len, const Tensor& out) {
  if (op == ReduceOp::ArgMax || op == ReduceOp::ArgMin || len < 2 * kElementwiseGrain) return false;
  const int64_t chunks = num_threads();
  std::vector<Acc<T>> partial(chunks);
  parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const int64_t from = len * c / chunks, to = len * (c + 1) / chunks;
      Acc<T> acc = op == ReduceOp::Sum ? Acc<T>(0) : Acc<T>(x[from]);
      for (int64_t i = from; i < to; ++i) {
        if (op == ReduceOp::Sum) acc += x[i];
        else acc = op == ReduceOp::Max ? scalar::max_nan<Acc<T>>(acc, x[i]) : scalar::min_nan<Acc<T>>(acc, x[i]);
      }
      partial[c] = acc;
    }
  });
  Acc<T> total = partial[0];
  for (int64_t c = 1; c < chunks; ++c) {
    if (op == ReduceOp::Sum) total += partial[c];
    else total = op == ReduceOp::Max ? scalar::max_nan(total, partial[c]) : scalar::min_nan(total, partial[c]);
  }
  out.data<T>()[0] = static_cast<T>(total);
  return true;
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const Tensor& in, const std::vector<int64_t>& dims,
                        const Tensor& out) const {
  if (in.dtype() == kBFloat16) {  // in float32 (the sums accumulate in double), rounded once
    const Tensor result = float32_result(out);
    reduce(op, widened(*this, in), dims, result);
    narrow_into(*this, result, out);
    return;
  }
  const Shape& shape = in.shape();
  const int64_t ndim = in.dim();
  // Reorder to (kept dims..., reduced dims...) so each output element owns one contiguous row.
  Shape order, perm_shape, perm_strides;
  int64_t len = 1;
  for (int64_t d = 0; d < ndim; ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) order.push_back(d);
  for (int64_t d : dims) {
    order.push_back(d);
    len *= shape[d];
  }
  const int64_t rows = in.numel() / std::max<int64_t>(len, 1);
  if (in.numel() == 0) {  // sums of nothing are 0; max/min of nothing are refused by the op
    fill(out, 0.0);
    return;
  }
  dispatch_all(in.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, bfloat16>) {  // bfloat16 took the float32 path
      fail("reduce", "bool tensors cannot be reduced");
    } else {
      // Leading dims reduced over a contiguous input: column sums, no copy.
      const bool leading = !dims.empty() && dims.back() == static_cast<int64_t>(dims.size()) - 1;
      if (rows == 1 && in.is_contiguous() && reduce_one_long_row<T>(op, in.data<T>(), len, out)) return;
      if (op == ReduceOp::Sum && leading && in.is_contiguous()) {
        sum_columns<T>(in.data<T>(), len, rows, out.data<T>());
        return;
      }
      for (int64_t d : order) {
        perm_shape.push_back(shape[d]);
        perm_strides.push_back(in.stride(d));
      }
      const Tensor permuted = contiguous_copy(make_view(in, perm_shape, perm_strides, in.offset()));
      reduce_rows<T>(op, permuted.data<T>(), rows, len, out);
    }
  });
}

void CpuBackend::cumsum(const Tensor& in, int64_t dim, bool reverse, const Tensor& out) const {
  const Tensor x = contiguous_copy(in);
  const DimSplit s = split_at(x.shape(), dim);
  dispatch_floating(x.dtype(), "cumsum", [&]<class T>() {
    const T* src = x.data<T>();
    T* dst = out.data<T>();
    parallel_for(s.outer * s.inner, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(s.size, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t line = begin; line < end; ++line) {
                     const int64_t o = line / s.inner, i = line % s.inner;
                     const int64_t base = o * s.size * s.inner + i;
                     Acc<T> acc = 0;
                     for (int64_t k = 0; k < s.size; ++k) {
                       const int64_t j = reverse ? s.size - 1 - k : k;
                       acc += src[base + j * s.inner];
                       dst[base + j * s.inner] = static_cast<T>(acc);
                     }
                   }
                 });
  });
}

// Fixed blocks of kSquaresBlock elements, summed in parallel and then in block order: the same
// bits for any number of threads.
void CpuBackend::sum_squares(const std::vector<Tensor>& xs, const Tensor& out) const {
  constexpr int64_t kSquaresBlock = 1 << 16;
  double* result = out.data<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor x = contiguous_copy(xs[i]);
    const int64_t n = x.numel(), blocks = (n + kSquaresBlock - 1) / kSquaresBlock;
    std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
    dispatch_floating(x.dtype(), "sum_squares", [&]<class T>() {
      const T* p = x.data<T>();
      parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
          double acc = 0;
          for (int64_t j = b * kSquaresBlock; j < std::min(n, (b + 1) * kSquaresBlock); ++j)
            acc += static_cast<double>(p[j]) * static_cast<double>(p[j]);
          partial[static_cast<size_t>(b)] = acc;
        }
      });
    });
    double total = 0;
    for (double v : partial) total += v;
    result[i] = total;
  }
}

}  // namespace linea::cpu
