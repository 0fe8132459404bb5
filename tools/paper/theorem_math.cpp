#include "tools/paper/theorem_math.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "nn/linear_attention/scan.h"
#include "tensor/creation.h"
#include "tensor/error.h"

namespace linea::cli::paper {

namespace {

const double kE = std::exp(1.0);

// Variance and central fourth moment of one term of the inner product.
struct TermMoments {
  double variance, fourth;
};

TermMoments term_moments(InnerProductMap map) {
  if (map == InnerProductMap::Identity) return {1.0, 9.0};  // x y: E = 0, E (xy)^2 = 1, E (xy)^4 = 3 * 3
  // w = e^{x + y} with x + y ~ N(0, 2) is log-normal: E w^k = e^{k^2}. Its central moments:
  const double m1 = kE, m2 = std::exp(4.0), m3 = std::exp(9.0), m4 = std::exp(16.0);
  return {m2 - m1 * m1, m4 - 4 * m3 * m1 + 6 * m2 * m1 * m1 - 3 * std::pow(m1, 4)};
}

Tensor feature(InnerProductMap map, const Tensor& x) { return map == InnerProductMap::Exp ? exp(x) : x; }

}  // namespace

const char* inner_product_map_name(InnerProductMap map) { return map == InnerProductMap::Exp ? "exp" : "identity"; }

double inner_product_variance(InnerProductMap map, int64_t d) {
  return static_cast<double>(d) * term_moments(map).variance;  // identity: d; exp: d (e^4 - e^2)
}

double variance_relative_standard_error(InnerProductMap map, int64_t d, int64_t samples) {
  LINEA_CHECK(d > 0 && samples > 3, "paper.theorem", "need d > 0 and more than 3 samples, got d=", d,
              " samples=", samples);
  const TermMoments t = term_moments(map);
  const double n = static_cast<double>(samples), dd = static_cast<double>(d);
  // A sum of d i.i.d. terms: variances add; mu4 = d mu4_term + 3 d (d - 1) var_term^2.
  const double var = dd * t.variance, mu4 = dd * t.fourth + 3 * dd * (dd - 1) * t.variance * t.variance;
  return std::sqrt((mu4 - (n - 3) / (n - 1) * var * var) / n) / var;
}

double monte_carlo_inner_product_variance(InnerProductMap map, int64_t d, int64_t samples, Generator& gen,
                                          int64_t chunk) {
  LINEA_CHECK(d > 0 && samples > 1 && chunk > 0, "paper.theorem", "need d > 0, samples > 1, chunk > 0, got d=", d,
              " samples=", samples, " chunk=", chunk);
  NoGradGuard no_grad;
  // Chan et al.'s pairwise update of (count, mean, sum of squared deviations): exact in float64
  // for any number of chunks, where a running sum of squares would cancel.
  double count = 0, mean = 0, m2 = 0;
  for (int64_t done = 0; done < samples; done += chunk) {
    const int64_t n = std::min(chunk, samples - done);
    const Tensor x = randn({n, d}, kFloat64, &gen), y = randn({n, d}, kFloat64, &gen);
    const std::vector<double> v = sum(mul(feature(map, x), feature(map, y)), {1}).to_vector<double>();
    double chunk_mean = 0, chunk_m2 = 0;
    for (double s : v) chunk_mean += s;
    chunk_mean /= static_cast<double>(n);
    for (double s : v) chunk_m2 += (s - chunk_mean) * (s - chunk_mean);
    const double total = count + static_cast<double>(n), delta = chunk_mean - mean;
    mean += delta * static_cast<double>(n) / total;
    m2 += chunk_m2 + delta * delta * count * static_cast<double>(n) / total;
    count = total;
  }
  return m2 / (count - 1);
}

double attention_output_variance(InnerProductMap map, int64_t d, int64_t t) {
  // Var o_t = sum_s E[a_ts^2] Var v (the v_s are independent and centred, so cross terms vanish),
  // with a = <phi(q), phi(k)>: E a^2 = Var a + (E a)^2, E a = 0 (identity) or d e (exp).
  const double mean = map == InnerProductMap::Exp ? static_cast<double>(d) * kE : 0.0;
  return static_cast<double>(t) * (inner_product_variance(map, d) + mean * mean);
}

std::vector<double> monte_carlo_attention_output_variance(InnerProductMap map, int64_t d, int64_t seq_len,
                                                          int64_t batch, Generator& gen) {
  LINEA_CHECK(d > 0 && seq_len > 0 && batch > 1, "paper.theorem", "need d > 0, seq_len > 0, batch > 1, got d=", d,
              " seq_len=", seq_len, " batch=", batch);
  NoGradGuard no_grad;
  // One head: (B, H=1, T, d). No gates: the scan is S_t = S_{t-1} + v_t phi(k_t)^T, o_t = S_t phi(q_t).
  const Tensor q = randn({batch, 1, seq_len, d}, kFloat64, &gen), k = randn({batch, 1, seq_len, d}, kFloat64, &gen),
               v = randn({batch, 1, seq_len, d}, kFloat64, &gen);
  const Tensor o = nn::linear::scan(feature(map, q), feature(map, k), v, Tensor(), Tensor());
  // Pool the batch and the d value coordinates at each position: (B, T, d) -> (T, B d).
  const Tensor per_position = reshape(contiguous(transpose(reshape(o, {batch, seq_len, d}), 0, 1)), {seq_len, batch * d});
  return var(per_position, {1}).to_vector<double>();
}

}  // namespace linea::cli::paper
