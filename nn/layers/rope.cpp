#include "nn/layers/rope.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "nn/layers/check.h"

namespace linea::nn {

RoPE::RoPE(int64_t head_dim, RoPEOptions options)
    : head_dim_(head_dim), rotary_dim_(options.rotary_dim == 0 ? head_dim : options.rotary_dim), base_(options.base) {
  check_positive(head_dim, "head_dim", "RoPE");
  LINEA_CHECK(rotary_dim_ > 0 && rotary_dim_ <= head_dim && rotary_dim_ % 2 == 0, "RoPE",
              "rotary_dim must be even and in (0, head_dim = ", head_dim, "], got ", rotary_dim_);
  LINEA_CHECK(options.base > 1.0, "RoPE", "base must be > 1, got ", options.base);
  check_positive(options.max_len, "max_len", "RoPE");
  ensure_tables(options.max_len, kFloat64, kCPU);
}

void RoPE::ensure_tables(int64_t length, DType dtype, Device device) const {
  if (table_length() < length) {
    const int64_t capacity = std::max(length, 2 * table_length());
    const int64_t half = rotary_dim_ / 2;
    std::vector<double> c(static_cast<size_t>(capacity * half)), s(c.size());
    for (int64_t p = 0; p < capacity; ++p)
      for (int64_t i = 0; i < half; ++i) {
        // The angle in float64 and from the exact position, so position 100000 is as accurate as 1.
        const double angle = static_cast<double>(p) * std::pow(base_, -2.0 * static_cast<double>(i) / rotary_dim_);
        c[static_cast<size_t>(p * half + i)] = std::cos(angle);
        s[static_cast<size_t>(p * half + i)] = std::sin(angle);
      }
    cos_ = from_vector(c, {capacity, half});
    sin_ = from_vector(s, {capacity, half});
    cos_cast_ = Tensor();
  }
  const bool stale = !cos_cast_.defined() || cos_cast_.dtype() != dtype || cos_cast_.device() != device;
  if (stale) {
    cos_cast_ = linea::to(linea::to(cos_, dtype), device);
    sin_cast_ = linea::to(linea::to(sin_, dtype), device);
  }
}

std::pair<Tensor, Tensor> RoPE::tables(int64_t length, DType dtype, Device device) const {
  ensure_tables(length, dtype, device);
  return {cos_cast_, sin_cast_};
}

Tensor RoPE::forward(const Tensor& x, int64_t offset) const {
  check_last_dim(x, head_dim_, "RoPE");
  LINEA_CHECK(x.dim() >= 2, "RoPE", "expects input (..., time, ", head_dim_, "), got ", x.describe());
  LINEA_CHECK(offset >= 0, "RoPE", "position offset must be non-negative, got ", offset);
  const int64_t length = x.size(-2);
  ensure_tables(offset + length, compute_dtype(x.dtype()), x.device());  // float32 for bfloat16 x
  return rotary_embedding(x, narrow(cos_cast_, 0, offset, length), narrow(sin_cast_, 0, offset, length));
}

Tensor RoPE::step(const Tensor& x, int64_t position) const {
  check_last_dim(x, head_dim_, "RoPE");
  return squeeze(forward(unsqueeze(x, -2), position), -2);
}

Tensor RoPE::step_rows(const Tensor& x, const std::vector<int64_t>& positions) const {
  check_last_dim(x, head_dim_, "RoPE");
  const auto batch = static_cast<int64_t>(positions.size());
  LINEA_CHECK(x.dim() >= 2 && x.size(0) == batch, "RoPE", "step_rows expects input (", batch,
              ", ..., ", head_dim_, ") for ", batch, " positions, got ", x.describe());
  int64_t last = 0;
  for (int64_t p : positions) {
    LINEA_CHECK(p >= 0, "RoPE", "positions must be non-negative, got ", p);
    last = std::max(last, p);
  }
  ensure_tables(last + 1, compute_dtype(x.dtype()), x.device());
  const Tensor index = linea::to(from_vector<int64_t>(positions, {batch}), x.device());
  // rotary_embedding reads row t's angles at dim -2: bring the batch there, (rest, B, dh).
  const Tensor rows = transpose(reshape(x, {batch, -1, head_dim_}), 0, 1);
  const Tensor y = rotary_embedding(rows, index_select(cos_cast_, 0, index), index_select(sin_cast_, 0, index));
  return reshape(transpose(y, 0, 1), x.shape());
}

}  // namespace linea::nn
