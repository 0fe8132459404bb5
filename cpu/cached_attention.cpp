// Softmax attention's decoding token over a KV cache kept in place (tensor/backend_kernels.def:
// cached_attention_step): the plain CPU kernel and the oracle of the CUDA one. The new key is
// rotated in the element type, as the rotary kernel does (scalar::rotate_pair), so that the cache
// holds what a prefill would have put there; scores and sums are in double. cached_attention_projected
// is the step into a buffer of (B, H dh) rows, then fused_linear on them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"
#include "tensor/creation.h"
#include "tensor/scalar_math.h"

namespace linea::cpu {

namespace {

// x rotated at table row `row` into y (dh values; dims past 2 half are copied).
template <class T>
void rotate(const T* x, const T* cos, const T* sin, int64_t half, int64_t dh, int64_t row, T* y) {
  for (int64_t i = 0; i < half; ++i)
    scalar::rotate_pair(x[i], x[i + half], cos[row * half + i], sin[row * half + i], y[i], y[i + half]);
  for (int64_t i = 2 * half; i < dh; ++i) y[i] = x[i];
}

}  // namespace

void CpuBackend::cached_attention_step(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& positions,
                                       const Tensor& cos, const Tensor& sin, double scale, const Tensor& cache_k,
                                       const Tensor& cache_v, const Tensor& out) const {
  const int64_t batch = q.size(0), heads = q.size(1), dh = q.size(2);
  const int64_t kv = cache_k.size(1), columns = cache_k.size(2), group = heads / kv;
  const int64_t half = cos.defined() ? cos.size(1) : 0, table = cos.defined() ? cos.size(0) : 0;
  int64_t* pos = positions.data<int64_t>();
  dispatch_floating(q.dtype(), "cached_attention_step", [&]<class T>() {
    const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>();
    const T *pcos = half ? cos.data<T>() : nullptr, *psin = half ? sin.data<T>() : nullptr;
    T *ck = cache_k.data<T>(), *cv = cache_v.data<T>(), *po = out.data<T>();
    // The writes first: every head of a row reads its K/V head's new column.
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t p = std::max<int64_t>(pos[b], 0), column = p % columns;
      if (half && p >= table) continue;  // past the tables: nothing written (the output is NaN)
      for (int64_t j = 0; j < kv; ++j) {
        const T *kin = pk + b * k.stride(0) + j * dh, *vin = pv + b * v.stride(0) + j * dh;
        T *kc = ck + ((b * kv + j) * columns + column) * dh, *vc = cv + ((b * kv + j) * columns + column) * dh;
        if (half) rotate(kin, pcos, psin, half, dh, p, kc);
        else std::copy(kin, kin + dh, kc);
        std::copy(vin, vin + dh, vc);
      }
    }
    parallel_for(batch * heads, 4, [&](int64_t begin, int64_t end) {
      std::vector<T> rotated(static_cast<size_t>(dh));
      std::vector<double> acc(static_cast<size_t>(dh));
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / heads, h = row % heads;
        const int64_t p = std::max<int64_t>(pos[b], 0), seen = std::min(p + 1, columns);
        T* o = po + row * dh;
        if (half && p >= table) {  // past the tables: NaN, never an out-of-bounds read
          std::fill(o, o + dh, std::numeric_limits<T>::quiet_NaN());
          continue;
        }
        const T* qi = pq + b * q.stride(0) + h * dh;
        if (half) rotate(qi, pcos, psin, half, dh, p, rotated.data());
        else std::copy(qi, qi + dh, rotated.begin());
        const int64_t base = (b * kv + h / group) * columns;
        double m = -std::numeric_limits<double>::infinity(), sum = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t s = 0; s < seen; ++s) {
          const T *ks = ck + (base + s) * dh, *vs = cv + (base + s) * dh;
          double score = 0;
          for (int64_t c = 0; c < dh; ++c) score += static_cast<double>(rotated[c]) * ks[c];
          score *= scale;
          // Online softmax: rescale what was accumulated when the running max grows.
          const double new_m = std::max(m, score), shrink = std::exp(m - new_m), w = std::exp(score - new_m);
          sum = sum * shrink + w;
          for (int64_t c = 0; c < dh; ++c) acc[c] = acc[c] * shrink + w * vs[c];
          m = new_m;
        }
        for (int64_t c = 0; c < dh; ++c) o[c] = static_cast<T>(acc[c] / sum);
      }
    });
    for (int64_t b = 0; b < batch; ++b) pos[b] = std::max<int64_t>(pos[b], 0) + 1;
  });
}

void CpuBackend::cached_attention_projected(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& positions,
                                            const Tensor& cos, const Tensor& sin, double scale, const Tensor& cache_k,
                                            const Tensor& cache_v, const FusedLinearInputs& projection,
                                            const Tensor& out) const {
  FusedLinearInputs product = projection;
  product.x = empty({q.size(0), q.size(1) * q.size(2)}, q.dtype(), q.device());
  cached_attention_step(q, k, v, positions, cos, sin, scale, cache_k, cache_v, product.x);  // writes rows of H dh
  fused_linear(product, FusedLinearOptions{}, out);
}

}  // namespace linea::cpu
