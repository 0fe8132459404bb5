// Softmax, log-softmax and cross-entropy on the CPU, each over lines along one dim. Sums run in
// double; the max is subtracted before exp so nothing overflows. exp itself runs in the element
// type: float32's expf is within an ulp and several times cheaper than a double exp, and over a
// language model's logits (tokens x vocabulary) these exps are a large share of a training step.
// Softmax and cross-entropy take bfloat16 too, computing in float32 (compute_t) and rounding once
// as they store; cross-entropy's losses and lse are then float32.
#include <cmath>
#include <limits>

#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"

namespace linea::cpu {

namespace {

// Runs f(base, stride) for every line of a contiguous tensor along dim: element j of the line is
// at base + j * stride.
template <class F>
void for_each_line(const Shape& shape, int64_t dim, F f) {
  const DimSplit s = split_at(shape, dim);
  parallel_for(s.outer * s.inner, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(s.size, 1)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t line = begin; line < end; ++line)
                   f((line / s.inner) * s.size * s.inner + line % s.inner, s.inner, s.size);
               });
}

// The line's max in the compute type C (compute_t: float for bfloat16).
template <class T, class C = compute_t<T>>
C line_max(const T* x, int64_t stride, int64_t n) {
  C m = -std::numeric_limits<C>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<C>(x[j * stride]));
  return m;
}

// exp(x - shift) in the compute type.
template <class C>
C exp_shifted(C x, C shift) {
  return std::exp(x - shift);
}

// log sum_j exp(x_j), stable; -inf for a line of all -inf (a fully masked row).
template <class T>
double line_logsumexp(const T* x, int64_t stride, int64_t n) {
  using C = compute_t<T>;
  const C m = line_max(x, stride, n);
  if (!std::isfinite(m)) return m;
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += exp_shifted(static_cast<C>(x[j * stride]), m);
  return m + std::log(sum);
}

}  // namespace

void CpuBackend::softmax(const Tensor& x_, int64_t dim, bool log, const Tensor& y) const {
  const Tensor x = contiguous_copy(x_);
  dispatch_floating_or_bf16(x.dtype(), "softmax", [&]<class T>() {
    using C = compute_t<T>;
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for_each_line(x.shape(), dim, [&](int64_t base, int64_t stride, int64_t n) {
      const double lse = line_logsumexp(in + base, stride, n);
      for (int64_t j = 0; j < n; ++j) {
        const double z = static_cast<double>(static_cast<C>(in[base + j * stride])) - lse;
        out[base + j * stride] = log ? static_cast<T>(z) : static_cast<T>(std::exp(static_cast<C>(z)));
      }
    });
  });
}

void CpuBackend::softmax_backward(const Tensor& y_, const Tensor& dy_, int64_t dim, bool log,
                                  const Tensor& dx) const {
  const Tensor y = contiguous_copy(y_), dy = contiguous_copy(dy_);
  dispatch_floating_or_bf16(y.dtype(), "softmax_backward", [&]<class T>() {
    using C = compute_t<T>;
    const T* py = y.data<T>();
    const T* pdy = dy.data<T>();
    T* pdx = dx.data<T>();
    for_each_line(y.shape(), dim, [&](int64_t base, int64_t stride, int64_t n) {
      double dot = 0;  // sum(dy * y) for softmax, sum(dy) for log_softmax
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = base + j * stride;
        const double g = static_cast<C>(pdy[at]);
        dot += log ? g : g * static_cast<C>(py[at]);
      }
      for (int64_t j = 0; j < n; ++j) {
        const int64_t at = base + j * stride;
        const C yv = static_cast<C>(py[at]), g = static_cast<C>(pdy[at]);
        pdx[at] = static_cast<T>(log ? g - std::exp(yv) * dot : yv * (g - dot));
      }
    });
  });
}

void CpuBackend::cross_entropy(const Tensor& logits_, const Tensor& targets_, int64_t ignore_index,
                               const Tensor& losses, const Tensor& lse) const {
  const Tensor logits = contiguous_copy(logits_), targets = contiguous_copy(targets_);
  const int64_t rows = logits.size(0), classes = logits.size(1);
  const int64_t* target = targets.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r)
    LINEA_CHECK(target[r] == ignore_index || (target[r] >= 0 && target[r] < classes), "cross_entropy",
                "target ", target[r], " at row ", r, " is out of range for ", classes, " classes");
  dispatch_floating_or_bf16(logits.dtype(), "cross_entropy", [&]<class T>() {
    using C = compute_t<T>;  // losses and lse: float32 for bfloat16 logits
    const T* x = logits.data<T>();
    C* loss = losses.data<C>();
    C* row_lse = lse.data<C>();
    parallel_for(rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(classes, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t r = begin; r < end; ++r) {
                     const double l = line_logsumexp(x + r * classes, 1, classes);
                     row_lse[r] = static_cast<C>(l);
                     loss[r] = target[r] == ignore_index
                                   ? C(0)
                                   : static_cast<C>(l - static_cast<C>(x[r * classes + target[r]]));
                   }
                 });
  });
}

void CpuBackend::cross_entropy_backward(const Tensor& logits_, const Tensor& targets_, int64_t ignore_index,
                                        const Tensor& lse_, const Tensor& dloss_, const Tensor& dlogits) const {
  const Tensor logits = contiguous_copy(logits_), targets = contiguous_copy(targets_);
  const Tensor lse = contiguous_copy(lse_), dloss = contiguous_copy(dloss_);
  const int64_t rows = logits.size(0), classes = logits.size(1);
  const int64_t* target = targets.data<int64_t>();
  dispatch_floating_or_bf16(logits.dtype(), "cross_entropy_backward", [&]<class T>() {
    using C = compute_t<T>;
    const T* x = logits.data<T>();
    T* dx = dlogits.data<T>();
    parallel_for(rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(classes, 1)),
                 [&](int64_t begin, int64_t end) {
                   for (int64_t r = begin; r < end; ++r) {
                     T* row = dx + r * classes;
                     if (target[r] == ignore_index) {
                       for (int64_t c = 0; c < classes; ++c) row[c] = T(0);
                       continue;
                     }
                     // forward was loss = lse - x[target], so dx = (softmax(x) - onehot) * dloss, in C
                     // and rounded once.
                     const C g = dloss.data<C>()[r], l = lse.data<C>()[r];
                     for (int64_t c = 0; c < classes; ++c) {
                       const C p = exp_shifted(static_cast<C>(x[r * classes + c]), l) * g;
                       row[c] = static_cast<T>(c == target[r] ? p - g : p);
                     }
                   }
                 });
  });
}

}  // namespace linea::cpu
