#include "nn/linear_attention/key_max.h"

#include <string>

#include "nn/names.h"
#include "tensor/error.h"

namespace linea::nn::linear {

namespace {
// The larger of two running maxima, `later` covering positions after `earlier`'s: later wins
// only when strictly greater, so ties keep the earlier position (and its gradient).
Tensor combine(const Tensor& earlier, const Tensor& later) { return where(gt(later, earlier), later, earlier); }

// The running max's scalar log decay lambda_t = m_{t-1} - m_t for m (B, H, T, 1) (T >= 1), and its
// last value, the state decoding carries on with.
KeyNormalization prefix_decay(const Tensor& m, const Tensor& previous) {
  const int64_t T = m.size(2);
  // m_{t-1} for every t from `previous`; before the first token of a sequence the state is empty,
  // so any value works and m_0 itself gives lambda_0 = 0 (previous_minus without `before`).
  return {.key_scale = Tensor(), .log_decay = previous_minus(m, 2, previous), .last_max = narrow(m, 2, T - 1, 1)};
}
}  // namespace

Tensor running_max(const Tensor& x, int64_t dim_in) {
  LINEA_CHECK(x.defined() && x.dim() > 0, "running_max", "expects a tensor with at least one dim");
  const int64_t dim = dim_in < 0 ? dim_in + x.dim() : dim_in;
  LINEA_CHECK(dim >= 0 && dim < x.dim(), "running_max", "dim ", dim_in, " is out of range for ", x.describe());
  const int64_t n = x.size(dim);
  Tensor m = x;  // after round r, m_t = max of x over (t - 2^r, t]
  for (int64_t offset = 1; offset < n; offset *= 2) {
    const Tensor merged = combine(narrow(m, dim, 0, n - offset), narrow(m, dim, offset, n - offset));
    m = cat({narrow(m, dim, 0, offset), merged}, dim);
  }
  return m;
}

KeyNormalization normalize_keys(const Tensor& mu, KeyMaxMode mode, const Tensor& previous) {
  LINEA_CHECK(mu.defined() && mu.dim() == 4 && mu.size(3) == 1, "normalize_keys",
              "expects per-token shifts (B, H, T, 1), got ", mu.defined() ? mu.describe() : "undefined");
  const int64_t T = mu.size(2);
  LINEA_CHECK(T > 0, "normalize_keys", "needs at least one token");
  if (mode == KeyMaxMode::Global) {
    const Tensor max_all = amax(mu, {2}, true);  // (B, H, 1, 1): sees every position
    return {.key_scale = exp(mu - max_all), .log_decay = Tensor(), .last_max = max_all};
  }
  Tensor m = running_max(mu, 2);
  if (previous.defined()) m = combine(previous, m);
  KeyNormalization norm = prefix_decay(m, previous);
  norm.key_scale = exp(mu - m);
  return norm;
}

NormalizedKeys prefix_normalized_keys(const Tensor& k, const Tensor& previous) {
  LINEA_CHECK(k.defined() && k.dim() == 4 && k.size(2) > 0, "prefix_normalized_keys",
              "expects keys (B, H, T, d) with at least one token, got ", k.defined() ? k.describe() : "undefined");
  const NormalizedExp keys = normalized_exp(k, NormalizedExpMode::PrefixMax, 1.0, previous);
  NormalizedKeys out{.features = keys.features, .norm = prefix_decay(keys.max, previous)};
  out.norm.last_max = keys.last_max;  // without a gradient, the kernel's own copy (no copy to make for a state)
  return out;
}

namespace {
const names::Table<KeyMaxMode> kModeNames[] = {{KeyMaxMode::Prefix, "prefix"}, {KeyMaxMode::Global, "global"}};
}  // namespace

std::string key_max_name(KeyMaxMode mode) { return names::name_in(kModeNames, mode); }
KeyMaxMode parse_key_max(const std::string& name) { return names::parse_in(kModeNames, name, "key max", "key max mode"); }

}  // namespace linea::nn::linear
