// Drawing tokens from logits on the CPU: the reference for the CUDA kernel, and the code behind
// generate()'s draws on the CPU (train/generate.cpp). The math is the one generate() always used,
// in double whatever the logits' dtype, with its sums in order, one row at a time.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"

namespace linea::cpu {

namespace {

// A row can be sampled when every logit is finite or -inf and at least one is finite: a NaN has
// no place in the order, and +inf (or a row of -inf) makes every p a NaN.
bool can_sample(const std::vector<double>& x) {
  bool any_finite = false;
  for (double v : x) {
    if (std::isnan(v) || v == INFINITY) return false;
    any_finite = any_finite || std::isfinite(v);
  }
  return any_finite;
}

int64_t sample_row(const std::vector<double>& logits, const SamplingParams& o, double u) {
  if (!can_sample(logits)) return -1;
  const int64_t v = static_cast<int64_t>(logits.size());
  // max_element keeps the first of equal maxima: the lowest id.
  if (o.temperature == 0.0) return std::max_element(logits.begin(), logits.end()) - logits.begin();
  // Candidates by decreasing logit (ties by id, so the order is deterministic).
  std::vector<int64_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  const int64_t k = o.top_k > 0 ? std::min(o.top_k, v) : v;
  std::vector<double> p(k);
  const double top = logits[order[0]];
  for (int64_t i = 0; i < k; ++i) p[i] = std::exp((logits[order[i]] - top) / o.temperature);
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  // Nucleus: the shortest prefix whose probability reaches top_p.
  int64_t keep = k;
  double running = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    running += p[i] / total;
    if (running >= o.top_p) {
      keep = i + 1;
      break;
    }
  }
  const double kept_total = std::accumulate(p.begin(), p.begin() + keep, 0.0);
  double threshold = u * kept_total;
  for (int64_t i = 0; i < keep; ++i) {
    threshold -= p[i];
    if (threshold < 0) return order[i];
  }
  return order[keep - 1];
}

}  // namespace

// logits (B, V) rows contiguous; u (B) float64 and out (B) int64 contiguous.
void CpuBackend::sample_tokens(const Tensor& logits, const Tensor& u, const SamplingParams& params,
                               const Tensor& out) const {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  dispatch_floating(logits.dtype(), "sample_tokens", [&]<class T>() {
    // A row's sort costs V log V: one row per task is grain enough.
    parallel_for(rows, 1, [&](int64_t begin, int64_t end) {
      std::vector<double> row(vocab);
      for (int64_t r = begin; r < end; ++r) {
        const T* x = logits.data<T>() + r * logits.stride(0);
        for (int64_t j = 0; j < vocab; ++j) row[j] = static_cast<double>(x[j]);
        out.data<int64_t>()[r] = sample_row(row, params, u.data<double>()[r]);
      }
    });
  });
}

}  // namespace linea::cpu
