#pragma once
// The numbers behind Theorem 3.1 of the ReGLA paper: for x, y ~ N(0, I_d) independent,
//   u = <x, y>            Var u = d
//   z = <exp(x), exp(y)>  Var z = d e^2 (e^2 - 1)
// (docs/paper.md derives both, and the tolerances), their Monte Carlo estimates with linea
// tensors, and the same question one layer up: the variance of causal linear attention's output
// at each position.
#include <cstdint>
#include <vector>

#include "tensor/random.h"

namespace linea::cli::paper {

enum class InnerProductMap { Identity, Exp };

// The closed forms of Theorem 3.1: d and d e^2 (e^2 - 1).
double inner_product_variance(InnerProductMap map, int64_t d);

// The standard error of the sample variance of n draws of the inner product, relative to the
// true variance: sqrt((mu4 - (n-3)/(n-1) sigma^4) / n) / sigma^2, with the inner product's
// central fourth moment mu4 known in closed form (its terms are i.i.d.: x_i y_i, or the
// log-normal e^{x_i + y_i}). The exp map's heavy tail makes this large: about sqrt(250 / n) at
// d = 16, which is why the Monte Carlo needs millions of draws for 5%.
double variance_relative_standard_error(InnerProductMap map, int64_t d, int64_t samples);

// Sample variance of the inner product over `samples` draws of (x, y), made with linea tensors
// in float64 on the CPU, `chunk` draws at a time (combined exactly, Chan et al.'s update).
double monte_carlo_inner_product_variance(InnerProductMap map, int64_t d, int64_t samples, Generator& gen,
                                          int64_t chunk = 1 << 14);

// One un-normalised causal linear attention, o_t = sum_{s <= t} <phi(q_t), phi(k_s)> v_s, with
// q, k, v ~ N(0, I_d) (no sum normalisation, no scale, no gate: what the theorem speaks about).
// Its variance per output coordinate at position t (1-based) is t E[<phi(q), phi(k)>^2]:
//   identity: t d            exp: t (d e^2 (e^2 - 1) + d^2 e^2)
double attention_output_variance(InnerProductMap map, int64_t d, int64_t t);

// The sample variance of o_t at every position t = 1..T over `batch` draws and the d value
// coordinates, computed by linea's scan (nn/linear_attention/scan.h) in float64.
std::vector<double> monte_carlo_attention_output_variance(InnerProductMap map, int64_t d, int64_t seq_len,
                                                          int64_t batch, Generator& gen);

const char* inner_product_map_name(InnerProductMap map);  // "identity", "exp"

}  // namespace linea::cli::paper
