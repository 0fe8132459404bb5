#pragma once
// ReGLA's key normalization (eq. 12; docs/math.md#key-max), made exactly causal.
//
// The paper divides every key feature by exp of the max of k over features AND all positions of
// the sequence, M. That max sees the future: through the output norm's eps, changing the last
// token changes earlier outputs (tests/nn/linear_attention_test.cpp reproduces this). linea's
// default is the prefix max m_t = max over features and positions <= t, in both forms:
//
//   phi_k(t) as seen at time t' >= t is exp(k_t - m_t'), and with k^_t = exp(k_t - m_t) (each key
//   normalized by its OWN running max)
//       exp(k_t - m_t') = k^_t exp(m_t - m_t') = k^_t prod_{r in (t, t']} exp(m_{r-1} - m_r),
//   a product of scalar decays exp(lambda_r), lambda_r = m_{r-1} - m_r <= 0.
//
// So the prefix max is an extra scalar log decay lambda on the state, which the scan folds into
// whatever other decay there is. The chunked form and the recurrent form then compute the same
// sum, and decoding rescales its state by exp(m_old - m_new) exactly when the max grows.
//
// The gradient through m: m_t is one scalar per (sequence, head, t), so without the output norm's
// eps (and with eps when there is no norm at all) the layer's output depends on it; it is NOT
// detached. It flows, as for max, to the one position holding the running max; on exact ties the
// EARLIEST such position gets it, in both forms (running_max below and the decoding update choose
// alike), so their gradients agree even then.
#include <string>

#include "autograd/ops.h"

namespace linea::nn::linear {

enum class KeyMaxMode {
  Prefix,  // max over positions <= t: causal, parallel == recurrent (the default)
  Global,  // the paper's max over the whole sequence: leaks the future through the norm's eps
};

// The running maximum of x along dim (a cumulative max), ties resolved to the earliest position
// for the gradient. Built from differentiable ops by doubling: ceil(log2 T) rounds, round r
// combining each position's window with the one 2^r earlier.
Tensor running_max(const Tensor& x, int64_t dim);

struct KeyNormalization {
  Tensor key_scale;  // (B, H, T, 1): exp(mu_t - m_t), multiplies the keys' features
  Tensor log_decay;  // (B, H, T, 1): lambda_t = m_{t-1} - m_t (prefix mode), else undefined
  Tensor last_max;   // (B, H, 1, 1): m of the last position, carried by decoding
};

// mu (B, H, T, 1): each token's log shift (FeatureMap::key_log_shift). previous (B, H, 1, 1): the
// running max over earlier tokens, or undefined at the start of a sequence. Global mode takes
// the max over the T positions given (and ignores previous). Composite (running_max by
// doubling): the reference of prefix_normalized_keys below.
KeyNormalization normalize_keys(const Tensor& mu, KeyMaxMode mode, const Tensor& previous);

// ReGLA's key features with the prefix max in one fused op (autograd/ops.h: normalized_exp,
// PrefixMax: one kernel forward, one backward): k (B, H, T, d) -> exp(k_t - m_t), equal to the
// normalized exp map's key features times normalize_keys(mu, Prefix, previous).key_scale, and the
// same log decay and last max (key_scale stays undefined: it is inside the features).
struct NormalizedKeys {
  Tensor features;        // (B, H, T, d), laid out in memory like k
  KeyNormalization norm;  // log_decay and last_max
};
NormalizedKeys prefix_normalized_keys(const Tensor& k, const Tensor& previous);

std::string key_max_name(KeyMaxMode mode);  // "prefix", "global"
KeyMaxMode parse_key_max(const std::string& name);

}  // namespace linea::nn::linear
