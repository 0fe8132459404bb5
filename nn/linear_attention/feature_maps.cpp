#include "nn/linear_attention/feature_maps.h"

#include <cmath>
#include <vector>

#include "nn/init.h"
#include "nn/names.h"
#include "tensor/error.h"

namespace linea::nn::linear {

void FeatureMap::check_input(const Tensor& z, const char* map) const {
  LINEA_CHECK(z.defined() && z.dim() == 4 && z.size(1) == heads_ && z.size(3) == in_dim_, map,
              "expects (batch, heads=", heads_, ", time, ", in_dim_, "), got ", z.defined() ? z.describe() : "undefined");
}

namespace {

// The maps without parameters or buffers: identity, ReLU, ELU + 1.
class ElementwiseMap final : public FeatureMap {
 public:
  ElementwiseMap(FeatureMapKind kind, int64_t heads, int64_t d) : FeatureMap(heads, d, d), kind_(kind) {}
  Tensor forward(const Tensor& z, Role) override {
    check_input(z, "feature map");
    switch (kind_) {
      case FeatureMapKind::Relu: return relu(z);
      case FeatureMapKind::EluPlusOne: return elu(z) + 1.0;
      default: return z;
    }
  }

 private:
  FeatureMapKind kind_;
};

// ReGLA's normalized exponential (eq. 11): exp(z - max_j z_j), every entry in (0, 1], so
// phi(q).phi(k) lies in (0, d]. The max stays in the graph: the map's value depends on it.
class NormalizedExpMap final : public FeatureMap {
 public:
  NormalizedExpMap(int64_t heads, int64_t d) : FeatureMap(heads, d, d) {}
  Tensor forward(const Tensor& z, Role) override {
    check_input(z, "normalized exp feature map");
    return exp(z - token_max(z));
  }
  Tensor key_log_shift(const Tensor& z) override { return token_max(z); }

 private:
  static Tensor token_max(const Tensor& z) { return amax(z, {-1}, true); }  // (B, H, T, 1)
};

// A (rows, d) matrix stored as a buffer: a projection drawn once and never trained.
Tensor host_matrix(const std::vector<double>& values, int64_t rows, int64_t cols) {
  return linea::to(from_vector<double>(values, {rows, cols}), kFloat32);
}

// RFA (Peng et al. 2021): phi(z) = sqrt(1/n) [sin(Wz), cos(Wz)] with n = m/2 rows of W ~ N(0, I).
// Then phi(x).phi(y) = (1/n) sum_i cos(w_i.(x - y)), an unbiased estimate of the Gaussian kernel
// exp(-|x - y|^2 / 2). RFA writes the factor as sqrt(1/m) with m counting the random vectors;
// here m counts features, so the factor is sqrt(1/n) = sqrt(2/m). One W serves every head (as in
// Performer). W has no learned scale sigma (RFA optionally learns one).
class RandomFourierMap final : public FeatureMap {
 public:
  RandomFourierMap(int64_t heads, int64_t d, int64_t m, Generator& gen) : FeatureMap(heads, d, m) {
    projection_ = linea::to(randn({m / 2, d}, kFloat64, &gen), kFloat32);
    register_buffer("projection", &projection_);
  }
  Tensor forward(const Tensor& z, Role) override {
    check_input(z, "random Fourier feature map");
    const Tensor p = matmul(z, t(projection_));  // (B, H, T, n)
    return cat({sin(p), cos(p)}, -1) * std::sqrt(2.0 / static_cast<double>(feature_dim()));
  }

 private:
  Tensor projection_;  // (n, d)
};

// FAVOR+ (Choromanski et al. 2021): phi(z) = exp(Wz - |z|^2/2) / sqrt(m), positive, with
// E[phi(x).phi(y)] = exp(x.y) when the rows of W are Gaussian in distribution. The rows are made
// orthogonal within blocks of d (fewer estimator errors); their lengths follow FavorRowNorms.
// No max is subtracted: the exponent w.z - |z|^2/2 is at most |w|^2/2 (about d/2), which fits
// float32 for head widths up to ~150, and a max over keys would break causality
// (docs/math.md#key-max). The inputs are not pre-scaled by d^(-1/4): the layer's query scale
// plays that part.
class FavorPlusMap final : public FeatureMap {
 public:
  FavorPlusMap(int64_t heads, int64_t d, int64_t m, FavorRowNorms norms, Generator& gen) : FeatureMap(heads, d, m) {
    std::vector<double> rows;
    rows.reserve(static_cast<size_t>(m * d));
    while (static_cast<int64_t>(rows.size()) < m * d) {
      const std::vector<double> block = orthonormal_rows(randn({d, d}, kFloat64, &gen)).to_vector<double>();
      // Chi lengths: the norms of an independent Gaussian block, drawn after the block itself.
      const std::vector<double> lengths = randn({d, d}, kFloat64, &gen).to_vector<double>();
      for (int64_t i = 0; i < d && static_cast<int64_t>(rows.size()) < m * d; ++i) {
        double length = std::sqrt(static_cast<double>(d));
        if (norms == FavorRowNorms::Chi) {
          double sq = 0;
          for (int64_t j = 0; j < d; ++j) sq += lengths[i * d + j] * lengths[i * d + j];
          length = std::sqrt(sq);
        }
        for (int64_t j = 0; j < d; ++j) rows.push_back(block[i * d + j] * length);
      }
    }
    projection_ = host_matrix(rows, m, d);
    register_buffer("projection", &projection_);
  }
  Tensor forward(const Tensor& z, Role) override {
    check_input(z, "FAVOR+ feature map");
    const Tensor exponent = matmul(z, t(projection_)) - 0.5 * sum(z * z, {-1}, true);
    return exp(exponent) * (1.0 / std::sqrt(static_cast<double>(feature_dim())));
  }

 private:
  Tensor projection_;  // (m, d)
};

// Per-head affine parameters u = W z + b, one set for queries and one for keys: W (H, out, d),
// b (H, out). Shared by Hedgehog (W = I at init) and the product map's sigmoid factor.
struct PerHeadAffine {
  Tensor weight[2], bias[2];  // [Role::Query], [Role::Key]

  Tensor apply(const Tensor& z, Role role) const {
    const int r = static_cast<int>(role);
    return matmul(z, transpose(weight[r], -1, -2)) + unsqueeze(bias[r], 1);  // (B, H, T, out)
  }
};

// Hedgehog (Zhang et al. 2024): u = W z + b with W = I and b = 0 at init, phi = softmax([u, -u])
// over all 2d entries (docs/math.md#feature-maps; the Hedgehog code takes two softmaxes of d
// entries each, which differs by a per-token factor). Positive, sums to 1, spiky like softmax.
class HedgehogMap final : public FeatureMap {
 public:
  HedgehogMap(int64_t heads, int64_t d) : FeatureMap(heads, d, 2 * d) {
    const char* names[2][2] = {{"query_weight", "query_bias"}, {"key_weight", "key_bias"}};
    for (int r = 0; r < 2; ++r) {
      affine_.weight[r] = contiguous(expand(unsqueeze(eye(d), 0), {heads, d, d}));
      affine_.bias[r] = zeros({heads, d});
      register_parameter(names[r][0], &affine_.weight[r]);
      register_parameter(names[r][1], &affine_.bias[r], /*weight_decay=*/false);
    }
  }
  Tensor forward(const Tensor& z, Role role) override {
    check_input(z, "Hedgehog feature map");
    const Tensor u = affine_.apply(z, role);
    return softmax(cat({u, neg(u)}, -1), -1);
  }

 private:
  static Tensor eye(int64_t d) {
    std::vector<float> values(static_cast<size_t>(d * d), 0.0f);
    for (int64_t i = 0; i < d; ++i) values[static_cast<size_t>(i * d + i)] = 1.0f;
    return from_vector<float>(values, {d, d});
  }
  PerHeadAffine affine_;
};

// The product ("diff") map of the LoLCATs setting (docs/math.md#feature-maps):
// phi(z) = base(z) (x) s(z), s(z) = sigmoid(W2 z + b2)/sqrt(m2) (Kronecker product,
// m = m_base m2). Since 0 < s_i < 1/sqrt(m2), 0 < s(q).s(k) < 1, so phi(q).phi(k) =
// (base(q).base(k)) (s(q).s(k)) keeps the base's sign and is smaller in size: with a
// non-negative base the attention stays non-negative and below the base's.
// W2 ~ N(0, 1/d) so W2 z has unit scale for unit-scale z; b2 = 0 (s starts near 1/(2 sqrt(m2))).
class ProductMap final : public FeatureMap {
 public:
  ProductMap(std::shared_ptr<FeatureMap> base, int64_t m2, Generator& gen)
      : FeatureMap(base->heads(), base->in_dim(), base->feature_dim() * m2), second_dim_(m2) {
    base_ = register_module("base", std::move(base));
    const int64_t h = heads(), d = in_dim();
    const char* names[2][2] = {{"query_weight", "query_bias"}, {"key_weight", "key_bias"}};
    for (int r = 0; r < 2; ++r) {
      affine_.weight[r] = zeros({h, m2, d});
      init::normal_(affine_.weight[r], 0.0, 1.0 / std::sqrt(static_cast<double>(d)), gen);
      affine_.bias[r] = zeros({h, m2});
      register_parameter(names[r][0], &affine_.weight[r]);
      register_parameter(names[r][1], &affine_.bias[r], /*weight_decay=*/false);
    }
  }
  Tensor forward(const Tensor& z, Role role) override {
    check_input(z, "product feature map");
    const Tensor first = base_->forward(z, role);  // (B, H, T, m1)
    const Tensor second = sigmoid(affine_.apply(z, role)) * (1.0 / std::sqrt(static_cast<double>(second_dim_)));
    Shape shape = first.shape();
    shape.back() = feature_dim();
    return reshape(unsqueeze(first, -1) * unsqueeze(second, -2), shape);
  }
  // s(z) carries no shift, so the base's shift is the product's.
  Tensor key_log_shift(const Tensor& z) override { return base_->key_log_shift(z); }

 private:
  std::shared_ptr<FeatureMap> base_;
  PerHeadAffine affine_;
  int64_t second_dim_;
};

}  // namespace

Tensor orthonormal_rows(const Tensor& gaussian) {
  LINEA_CHECK(gaussian.defined() && gaussian.dim() == 2 && gaussian.size(0) <= gaussian.size(1), "orthonormal_rows",
              "expects a (rows, cols) matrix with rows <= cols, got ", gaussian.defined() ? gaussian.describe() : "undefined");
  const int64_t rows = gaussian.size(0), cols = gaussian.size(1);
  std::vector<double> a = gaussian.to_vector<double>();
  auto row = [&](int64_t i) { return a.data() + i * cols; };
  for (int64_t i = 0; i < rows; ++i) {
    // Modified Gram-Schmidt: subtract each earlier direction from the CURRENT residual, which
    // keeps the rows orthogonal to rounding even when the input is badly conditioned.
    for (int64_t j = 0; j < i; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < cols; ++c) dot += row(i)[c] * row(j)[c];
      for (int64_t c = 0; c < cols; ++c) row(i)[c] -= dot * row(j)[c];
    }
    double norm = 0;
    for (int64_t c = 0; c < cols; ++c) norm += row(i)[c] * row(i)[c];
    norm = std::sqrt(norm);
    LINEA_CHECK(norm > 1e-12, "orthonormal_rows", "row ", i, " is linearly dependent on the rows above it");
    for (int64_t c = 0; c < cols; ++c) row(i)[c] /= norm;
  }
  return from_vector<double>(a, {rows, cols});
}

int64_t feature_dim_of(const FeatureMapConfig& config, int64_t in_dim) {
  LINEA_CHECK(in_dim > 0, "feature map", "input width must be positive, got ", in_dim);
  const int64_t m = config.num_features > 0 ? config.num_features : in_dim;
  switch (config.kind) {
    case FeatureMapKind::RandomFourier:
      LINEA_CHECK(m % 2 == 0, "feature map", "rfa needs an even number of features (sin and cos), got ", m);
      return m;
    case FeatureMapKind::FavorPlus: return m;
    case FeatureMapKind::Hedgehog: return 2 * in_dim;
    case FeatureMapKind::Product:
      LINEA_CHECK(config.product_base != FeatureMapKind::Product, "feature map", "a product map's base cannot be a product");
      LINEA_CHECK(config.product_second_dim > 0, "feature map", "product_second_dim must be positive, got ",
                  config.product_second_dim);
      return feature_dim_of({config.product_base, config.num_features, config.favor_row_norms}, in_dim) *
             config.product_second_dim;
    default:
      LINEA_CHECK(config.num_features == 0 || config.num_features == in_dim, "feature map", feature_map_name(config.kind),
                  " maps each entry on its own, so it has as many features as inputs (", in_dim,
                  "); num_features ", config.num_features, " applies to random maps only");
      return in_dim;
  }
}

std::shared_ptr<FeatureMap> make_feature_map(const FeatureMapConfig& config, int64_t heads, int64_t in_dim,
                                             Generator& gen) {
  LINEA_CHECK(heads > 0, "feature map", "heads must be positive, got ", heads);
  const int64_t m = feature_dim_of(config, in_dim);
  switch (config.kind) {
    case FeatureMapKind::Identity:
    case FeatureMapKind::Relu:
    case FeatureMapKind::EluPlusOne: return std::make_shared<ElementwiseMap>(config.kind, heads, in_dim);
    case FeatureMapKind::NormalizedExp: return std::make_shared<NormalizedExpMap>(heads, in_dim);
    case FeatureMapKind::RandomFourier: return std::make_shared<RandomFourierMap>(heads, in_dim, m, gen);
    case FeatureMapKind::FavorPlus:
      return std::make_shared<FavorPlusMap>(heads, in_dim, m, config.favor_row_norms, gen);
    case FeatureMapKind::Hedgehog: return std::make_shared<HedgehogMap>(heads, in_dim);
    case FeatureMapKind::Product: {
      FeatureMapConfig base = config;
      base.kind = config.product_base;
      return std::make_shared<ProductMap>(make_feature_map(base, heads, in_dim, gen), config.product_second_dim, gen);
    }
  }
  fail("feature map", "unknown kind");
}

namespace {
const names::Table<FeatureMapKind> kMapNames[] = {
    {FeatureMapKind::Identity, "identity"},   {FeatureMapKind::Relu, "relu"},
    {FeatureMapKind::EluPlusOne, "elu+1"},    {FeatureMapKind::RandomFourier, "rfa"},
    {FeatureMapKind::FavorPlus, "favor+"},    {FeatureMapKind::Hedgehog, "hedgehog"},
    {FeatureMapKind::NormalizedExp, "normalized_exp"}, {FeatureMapKind::Product, "product"},
};
}  // namespace

std::string feature_map_name(FeatureMapKind kind) { return names::name_in(kMapNames, kind); }
FeatureMapKind parse_feature_map(const std::string& name) {
  return names::parse_in(kMapNames, name, "feature map", "feature map");
}

}  // namespace linea::nn::linear
