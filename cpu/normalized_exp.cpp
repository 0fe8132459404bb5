// ReGLA's normalized exponential feature map (tensor/backend.h: normalized_exp), the plain CPU
// kernel and the oracle of the CUDA one. The row max works row by row, in parallel over rows; the
// prefix max walks each (batch, head) sequence in time order, in parallel over sequences. The
// backward finds each max's position again from its value (the first element equal to it) rather
// than saving positions: the search only runs where the gradient needs it, and nothing but y and
// m has to outlive the forward.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"
#include "tensor/scalar_math.h"
#include "tensor/sequence_rows.h"

namespace linea::cpu {

namespace {

// The first c with row[c] == value: where a max came from. d when none does.
template <class T>
int64_t first_holding(const T* row, int64_t d, T value) {
  for (int64_t c = 0; c < d; ++c)
    if (scalar::same_value(row[c], value)) return c;
  return d;
}

template <class T>
void exp_row(const T* x, T* y, int64_t d, T m, T scale) {
  for (int64_t c = 0; c < d; ++c) y[c] = scale * std::exp(x[c] - m);
}

// dy's row into dx's (dx_c = y_c dy_c); returns sum_c y_c dy_c.
template <class T>
T product_row(const T* y, const T* dy, T* dx, int64_t d) {
  T dot = 0;
  for (int64_t c = 0; c < d; ++c) {
    dx[c] = y[c] * dy[c];
    dot += dx[c];
  }
  return dot;
}

// The sizes of a (B, H, T, d) input, and how many rows or sequences make a task.
struct Sizes {
  int64_t sequences, length, features;
  explicit Sizes(const Tensor& x) : sequences(x.size(0) * x.size(1)), length(x.size(2)), features(x.size(3)) {}
  int64_t row_grain() const { return std::max<int64_t>(1, kElementwiseGrain / features); }
  int64_t sequence_grain() const { return std::max<int64_t>(1, kElementwiseGrain / (length * features)); }
};

}  // namespace

void CpuBackend::normalized_exp(const Tensor& x, NormalizedExpMode mode, double scale, const Tensor& previous,
                                const Tensor& y, const Tensor& m, const Tensor& last) const {
  dispatch_floating(x.dtype(), "normalized_exp", [&]<class T>() {
    const Sizes n(x);
    const SequenceRows xr = sequence_rows(x), yr = sequence_rows(y);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    T* pm = m.data<T>();
    const T s = static_cast<T>(scale);
    if (mode == NormalizedExpMode::RowMax) {
      parallel_for(n.sequences * n.length, n.row_grain(), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const int64_t seq = r / n.length, t = r % n.length;
          pm[r] = scalar::max_of(px + xr.at(seq, t), n.features);
          exp_row(px + xr.at(seq, t), py + yr.at(seq, t), n.features, pm[r], s);
        }
      });
      return;
    }
    const T* prev = previous.defined() ? previous.data<T>() : nullptr;
    parallel_for(n.sequences, n.sequence_grain(), [&](int64_t begin, int64_t end) {
      for (int64_t seq = begin; seq < end; ++seq) {
        T* ms = pm + seq * n.length;
        T running = prev ? prev[seq] : -std::numeric_limits<T>::infinity();
        for (int64_t t = 0; t < n.length; ++t) {
          const T mu = scalar::max_of(px + xr.at(seq, t), n.features);
          if (scalar::takes_over(mu, running)) running = mu;
          ms[t] = running;
          exp_row(px + xr.at(seq, t), py + yr.at(seq, t), n.features, running, s);
        }
        if (last.defined()) last.data<T>()[seq] = running;
      }
    });
  });
}

void CpuBackend::normalized_exp_backward(const Tensor& x, const Tensor& y, const Tensor& m, const Tensor& previous,
                                         const Tensor& dy, const Tensor& dm, NormalizedExpMode mode,
                                         const Tensor& dx, const Tensor& dprevious) const {
  dispatch_floating(x.dtype(), "normalized_exp_backward", [&]<class T>() {
    const Sizes n(x);
    const SequenceRows xr = sequence_rows(x), yr = sequence_rows(y), dyr = sequence_rows(dy), dxr = sequence_rows(dx);
    const T *px = x.data<T>(), *py = y.data<T>(), *pm = m.data<T>(), *pdy = dy.data<T>(), *pdm = dm.data<T>();
    T* pdx = dx.data<T>();
    // g_t = dm_t - sum_c y_t,c dy_t,c, everything that reaches m_t; dx_t = y_t dy_t.
    auto row_gradient = [&](int64_t seq, int64_t t) {
      return pdm[seq * n.length + t] - product_row(py + yr.at(seq, t), pdy + dyr.at(seq, t), pdx + dxr.at(seq, t), n.features);
    };
    // Adds g to the element of row t holding the max value (x is unchanged, so it is still there).
    auto to_max = [&](int64_t seq, int64_t t, T value, T g) {
      const int64_t c = first_holding(px + xr.at(seq, t), n.features, value);
      if (c < n.features) pdx[dxr.at(seq, t) + c] += g;
    };
    if (mode == NormalizedExpMode::RowMax) {
      parallel_for(n.sequences * n.length, n.row_grain(), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const int64_t seq = r / n.length, t = r % n.length;
          to_max(seq, t, pm[r], row_gradient(seq, t));
        }
      });
      return;
    }
    // Backwards in time, the g_t of every row since the last change of the running max add up in
    // `owed`; a row that raised the max (strictly: ties stay with the earlier row) takes them, and
    // what is left at the start belongs to previous.
    const T* prev = previous.defined() ? previous.data<T>() : nullptr;
    T* dprev = dprevious.defined() ? dprevious.data<T>() : nullptr;
    parallel_for(n.sequences, n.sequence_grain(), [&](int64_t begin, int64_t end) {
      for (int64_t seq = begin; seq < end; ++seq) {
        const T* ms = pm + seq * n.length;
        T owed = 0;
        for (int64_t t = n.length - 1; t >= 0; --t) {
          owed += row_gradient(seq, t);
          const bool raised = t > 0 ? scalar::takes_over(ms[t], ms[t - 1]) : !prev || scalar::takes_over(ms[0], prev[seq]);
          if (raised) {
            to_max(seq, t, ms[t], owed);
            owed = 0;
          }
        }
        if (dprev) dprev[seq] = owed;
      }
    });
  });
}

}  // namespace linea::cpu
