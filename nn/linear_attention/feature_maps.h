#pragma once
// Feature maps phi: R^d -> R^m of linear attention (docs/math.md#feature-maps).
// Linear attention replaces softmax(q.k) by phi(q).phi(k), so the output can be accumulated in a
// fixed-size state S = sum_s v_s phi(k_s)^T.
//
// A map works per head and per token: z (B, H, T, d) -> (B, H, T, m). Every map here treats each
// token on its own, so the same call serves one token at a time when decoding (T = 1). The one
// quantity that spans tokens -- ReGLA's key max over positions -- is not computed here: a map
// whose features are exponentials reports each token's log shift (key_log_shift), and the layer
// turns it into a running max and a decay (nn/linear_attention/key_max.h).
//
// One FeatureMap object serves both queries and keys of a layer (the Role argument says which):
// a random projection must be the SAME for q and k or phi(q).phi(k) estimates nothing, while a
// learnable map (Hedgehog, the product map's second factor) keeps separate parameters for q and k,
// as in Hedgehog (Zhang et al. 2024) and LoLCATs.
#include <memory>
#include <string>

#include "nn/module.h"

namespace linea::nn::linear {

enum class FeatureMapKind {
  Identity,       // phi(z) = z                                     m = d
  Relu,           // max(z, 0)                                      m = d
  EluPlusOne,     // elu(z) + 1 > 0 (Katharopoulos et al. 2020)     m = d
  RandomFourier,  // RFA: sqrt(1/n) [sin(Wz), cos(Wz)], W ~ N(0,I)  m = 2n
  FavorPlus,      // Performer: exp(Wz - |z|^2/2) / sqrt(m), W with orthogonal rows
  Hedgehog,       // softmax([u, -u]), u = Wz + b learnable (W = I, b = 0 at init)   m = 2d
  NormalizedExp,  // ReGLA: exp(z - max_j z_j); keys also divided by a max over positions  m = d
  Product,        // "diff" map: base(z) (x) sigmoid(W2 z + b2)/sqrt(m2), Kronecker   m = m_base m2
};

// How FAVOR+ sets the lengths of its orthogonal rows.
enum class FavorRowNorms {
  Chi,       // each row as long as an independent Gaussian vector would be (chi with d degrees):
             // Performer's default, which keeps E[phi(q).phi(k)] = exp(q.k) exactly
  SqrtDim,   // every row sqrt(d) long: the mean of the chi lengths, a lower-variance choice
};

struct FeatureMapConfig {
  FeatureMapKind kind = FeatureMapKind::Identity;
  // Random maps only: the number of features m (RFA: m even, m/2 frequencies; FAVOR+: m rows,
  // in blocks of d orthogonal rows when m > d). 0 means m = d.
  int64_t num_features = 0;
  FavorRowNorms favor_row_norms = FavorRowNorms::Chi;
  // Product only: the base map (any kind but Product) and the size m2 of the sigmoid factor.
  FeatureMapKind product_base = FeatureMapKind::Relu;
  int64_t product_second_dim = 4;
};

enum class Role { Query, Key };

class FeatureMap : public Module {
 public:
  FeatureMap(int64_t heads, int64_t in_dim, int64_t feature_dim)
      : heads_(heads), in_dim_(in_dim), feature_dim_(feature_dim) {}
  int64_t heads() const { return heads_; }
  int64_t in_dim() const { return in_dim_; }        // d
  int64_t feature_dim() const { return feature_dim_; }  // m

  // z (B, H, T, d) -> phi(z) (B, H, T, m).
  virtual Tensor forward(const Tensor& z, Role role) = 0;

  // Maps whose key features are exponentials exp(z - shift) with a per-token shift return that
  // shift, mu_t = max_j z_tj, as (B, H, T, 1): forward(z, Key) has already divided it out (so its
  // entries are <= 1), and the layer multiplies by exp(mu_t - m_t) with m_t the max of mu over
  // the positions it allows (ReGLA's eq. 12). Undefined for every other map.
  virtual Tensor key_log_shift(const Tensor& z) { return Tensor(); }

 protected:
  // z must be (B, H, T, d) with this map's H and d.
  void check_input(const Tensor& z, const char* map) const;

 private:
  int64_t heads_, in_dim_, feature_dim_;
};

// Builds a map for `heads` heads of width `in_dim`; random projections and initial parameters
// are drawn from gen.
std::shared_ptr<FeatureMap> make_feature_map(const FeatureMapConfig& config, int64_t heads, int64_t in_dim,
                                             Generator& gen);

// The feature dimension m a config gives for inputs of width in_dim (validates the config).
int64_t feature_dim_of(const FeatureMapConfig& config, int64_t in_dim);

// "identity", "relu", "elu+1", "rfa", "favor+", "hedgehog", "normalized_exp", "product".
std::string feature_map_name(FeatureMapKind kind);
FeatureMapKind parse_feature_map(const std::string& name);

// Rows of an (rows, cols) float64 matrix made orthonormal by modified Gram-Schmidt, in place on
// the host (rows <= cols). Exposed for its test.
Tensor orthonormal_rows(const Tensor& gaussian);

}  // namespace linea::nn::linear
