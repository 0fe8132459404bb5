#include "nn/layers/norm.h"

#include "nn/layers/check.h"

namespace linea::nn {

Norm::Norm(RowNorm kind, int64_t dim, double eps, bool with_weight, bool with_bias, const char* layer)
    : kind_(kind), dim_(dim), eps_(eps), layer_(layer) {
  check_positive(dim, "dim", layer);
  LINEA_CHECK(eps >= 0, layer, "eps must be non-negative, got ", eps);
  if (with_weight) {
    weight = ones({dim});
    register_parameter("weight", &weight, /*weight_decay=*/false);
  }
  if (with_bias) {
    bias = zeros({dim});
    register_parameter("bias", &bias, /*weight_decay=*/false);
  }
}

Tensor Norm::forward(const Tensor& x, DType out) const {
  check_last_dim(x, dim_, layer_);
  return kind_ == RowNorm::Layer ? layer_norm(x, weight, bias, eps_, out) : rms_norm(x, weight, eps_, out);
}

HeadNorm::HeadNorm(int64_t num_heads, int64_t head_dim, HeadNormOptions options)
    : num_heads_(num_heads), head_dim_(head_dim), options_(options) {
  check_positive(num_heads, "num_heads", "HeadNorm");
  check_positive(head_dim, "head_dim", "HeadNorm");
  LINEA_CHECK(options.eps >= 0, "HeadNorm", "eps must be non-negative, got ", options.eps);
  if (options.weight == HeadNormWeight::None) return;
  const int64_t size = options.weight == HeadNormWeight::Shared ? head_dim : num_heads * head_dim;
  weight = ones({size});
  register_parameter("weight", &weight, /*weight_decay=*/false);
  if (options.kind == NormKind::Layer) {
    bias = zeros({size});
    register_parameter("bias", &bias, /*weight_decay=*/false);
  }
}

Tensor HeadNorm::forward(const Tensor& x) const {
  check_last_dim(x, head_dim_, "HeadNorm");
  LINEA_CHECK(x.dim() >= 2 && x.size(-2) == num_heads_, "HeadNorm", "expects input (..., ", num_heads_, " heads, ",
              head_dim_, "), got ", x.describe());
  // Shared parameters have the normalized dim's size and go into the fused kernel; per-channel
  // ones, viewed (H, dh), broadcast over the leading dims after it.
  const bool shared = options_.weight == HeadNormWeight::Shared;
  const Tensor w = shared ? weight : Tensor(), b = shared ? bias : Tensor();
  Tensor y = options_.kind == NormKind::RMS ? rms_norm(x, w, options_.eps) : layer_norm(x, w, b, options_.eps);
  if (options_.weight != HeadNormWeight::PerChannel) return y;
  y = y * view(weight, {num_heads_, head_dim_});
  return bias.defined() ? y + view(bias, {num_heads_, head_dim_}) : y;
}

}  // namespace linea::nn
