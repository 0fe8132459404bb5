// The pieces of LinearAttention on their own: feature maps (nn/linear_attention/feature_maps.h), gates
// (nn/linear_attention/gates.h) and the causal key max (nn/linear_attention/key_max.h).
#include <cmath>
#include <limits>

#include "nn/linear_attention/feature_maps.h"
#include "nn/linear_attention/gates.h"
#include "nn/linear_attention/key_max.h"
#include "tests/test_util.h"

namespace linea::nn::linear {
namespace {

using linea::testing::all_close;

constexpr int64_t kH = 2, kD = 4;

std::shared_ptr<FeatureMap> map_of(FeatureMapConfig c, int64_t d = kD, uint64_t seed = 1) {
  Generator gen(seed);
  auto m = make_feature_map(c, kH, d, gen);
  m->to(kFloat64);
  return m;
}

Tensor buffer(const Module& m, const std::string& name) {
  for (const auto& [n, t] : m.named_buffers())
    if (n == name) return t;
  return Tensor();
}

const FeatureMapKind kAllMaps[] = {FeatureMapKind::Identity,  FeatureMapKind::Relu,          FeatureMapKind::EluPlusOne,
                                   FeatureMapKind::RandomFourier, FeatureMapKind::FavorPlus, FeatureMapKind::Hedgehog,
                                   FeatureMapKind::NormalizedExp, FeatureMapKind::Product};

// ---- feature maps -------------------------------------------------------------------------------

// Every map gives (B, H, T, m) with the advertised m and treats each token on its own, so the map
// of one token (decoding) equals the same row of the map of the sequence.
TEST(LinearFeatureMaps, ShapesAndPerTokenUse) {
  for (const FeatureMapKind kind : kAllMaps) {
    const FeatureMapConfig c{.kind = kind, .num_features = kind == FeatureMapKind::RandomFourier ? 6 : 0};
    auto m = map_of(c);
    EXPECT_EQ(m->feature_dim(), feature_dim_of(c, kD)) << feature_map_name(kind);
    Generator gen(2);
    const Tensor z = randn({3, kH, 5, kD}, kFloat64, &gen);
    for (const Role role : {Role::Query, Role::Key}) {
      const Tensor all = m->forward(z, role);
      EXPECT_EQ(all.shape(), (Shape{3, kH, 5, m->feature_dim()})) << feature_map_name(kind);
      for (int64_t t = 0; t < 5; ++t)
        EXPECT_TRUE(all_close(m->forward(narrow(z, 2, t, 1), role), narrow(all, 2, t, 1), 1e-14, 1e-15))
            << feature_map_name(kind) << " token " << t;
    }
    EXPECT_EQ(parse_feature_map(feature_map_name(kind)), kind);
  }
  EXPECT_LINEA_ERROR(map_of({.kind = FeatureMapKind::Relu})->forward(randn({1, kH, 2, kD + 1}), Role::Query),
                     "feature map", "heads=2");
}

TEST(LinearFeatureMaps, ElementwiseMaps) {
  const Tensor z = tensor({-2.0, -0.5, 0.5, 3.0, -1.0, 0.25, 1.5, -3.0}, {1, kH, 1, kD}, kFloat64);
  EXPECT_TRUE(all_close(map_of({.kind = FeatureMapKind::Identity})->forward(z, Role::Key), z));
  EXPECT_TRUE(all_close(map_of({.kind = FeatureMapKind::Relu})->forward(z, Role::Key), relu(z)));
  const Tensor elu1 = map_of({.kind = FeatureMapKind::EluPlusOne})->forward(z, Role::Key);
  EXPECT_TRUE(all_close(elu1, elu(z) + 1.0));
  EXPECT_GT(min(elu1).item(), 0.0);
}

// exp(z - max_j z_j): entries in (0, 1] with exactly one 1 per token (so 0 < phi(q).phi(k) <= d),
// and the key log shift is that max.
TEST(LinearFeatureMaps, NormalizedExpIsBoundedByOne) {
  auto m = map_of({.kind = FeatureMapKind::NormalizedExp});
  Generator gen(3);
  const Tensor z = randn({2, kH, 6, kD}, kFloat64, &gen) * 10.0;
  const Tensor phi = m->forward(z, Role::Query);
  EXPECT_GT(min(phi).item(), 0.0);
  EXPECT_TRUE(all_close(amax(phi, {-1}), ones({2, kH, 6}, kFloat64)));
  EXPECT_TRUE(all_close(m->key_log_shift(z), amax(z, {-1}, true)));
  EXPECT_TRUE(all_close(phi * exp(m->key_log_shift(z)), exp(z), 1e-12));
  EXPECT_FALSE(map_of({.kind = FeatureMapKind::Relu})->key_log_shift(z).defined());
}

// phi(x).phi(y) = (1/n) sum_i cos(w_i.(x - y)): exactly 1 for x = y, and close to the Gaussian
// kernel exp(-|x - y|^2 / 2) with many features. W is one buffer shared by q and k.
TEST(LinearFeatureMaps, RandomFourierEstimatesTheGaussianKernel) {
  auto m = map_of({.kind = FeatureMapKind::RandomFourier, .num_features = 20000});
  EXPECT_EQ(buffer(*m, "projection").shape(), (Shape{10000, kD}));
  EXPECT_TRUE(m->parameters().empty());
  Generator gen(4);
  const Tensor x = randn({1, kH, 1, kD}, kFloat64, &gen) * 0.5, y = randn({1, kH, 1, kD}, kFloat64, &gen) * 0.5;
  const Tensor fx = m->forward(x, Role::Query), fy = m->forward(y, Role::Key);
  EXPECT_TRUE(all_close(sum(fx * fx, {-1}), ones({1, kH, 1}, kFloat64), 1e-12));
  const Tensor kernel = exp(sum((x - y) * (x - y), {-1}) * -0.5);
  EXPECT_TRUE(all_close(sum(fx * fy, {-1}), kernel, 0.0, 0.03));
  EXPECT_LINEA_ERROR(map_of({.kind = FeatureMapKind::RandomFourier, .num_features = 5}), "even");
}

TEST(LinearFeatureMaps, GramSchmidtGivesOrthonormalRows) {
  Generator gen(5);
  const Tensor q = orthonormal_rows(randn({5, 7}, kFloat64, &gen));
  EXPECT_TRUE(all_close(matmul(q, t(q)), from_vector<double>({1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1,
                                                              0, 0, 0, 0, 0, 1},
                                                             {5, 5}),
                        0.0, 1e-13));
  EXPECT_LINEA_ERROR(orthonormal_rows(zeros({2, 3}, kFloat64)), "linearly dependent");
  EXPECT_LINEA_ERROR(orthonormal_rows(zeros({3, 2}, kFloat64)), "rows <= cols");
}

// FAVOR+: rows orthogonal within each block of d, lengths sqrt(d) or chi-distributed, positive
// features, and E[phi(x).phi(y)] = exp(x.y).
TEST(LinearFeatureMaps, FavorPlusHasOrthogonalRowsAndEstimatesExp) {
  for (const FavorRowNorms norms : {FavorRowNorms::Chi, FavorRowNorms::SqrtDim}) {
    auto m = map_of({.kind = FeatureMapKind::FavorPlus, .num_features = 10, .favor_row_norms = norms});
    const Tensor w = buffer(*m, "projection");  // (10, 4): blocks of 4, 4 and 2 rows
    ASSERT_EQ(w.shape(), (Shape{10, kD}));
    const Tensor lengths = sqrt(sum(w * w, {-1}, true));
    for (const int64_t start : {0, 4, 8}) {
      const int64_t n = std::min<int64_t>(4, 10 - start);
      const Tensor unit = narrow(w / lengths, 0, start, n);
      const Tensor gram = matmul(unit, t(unit));
      EXPECT_LT(max_abs_diff(gram, to(tril(triu(ones({n, n}))), kFloat64)), 1e-6) << "block at " << start;
    }
    if (norms == FavorRowNorms::SqrtDim) EXPECT_TRUE(all_close(lengths, full({10, 1}, 2.0, kFloat64), 1e-6));
    else EXPECT_GT(max(lengths).item() - min(lengths).item(), 1e-3);
  }
  auto m = map_of({.kind = FeatureMapKind::FavorPlus, .num_features = 40000});
  Generator gen(6);
  const Tensor x = randn({1, kH, 1, kD}, kFloat64, &gen) * 0.4, y = randn({1, kH, 1, kD}, kFloat64, &gen) * 0.4;
  const Tensor fx = m->forward(x, Role::Query), fy = m->forward(y, Role::Key);
  EXPECT_GT(min(fx).item(), 0.0);
  EXPECT_TRUE(all_close(sum(fx * fy, {-1}), exp(sum(x * y, {-1})), 0.05));
}

// Hedgehog starts as softmax([z, -z]) (W = I, b = 0) and keeps separate parameters for q and k.
TEST(LinearFeatureMaps, HedgehogStartsAsSoftmaxOfPlusMinusZ) {
  auto m = map_of({.kind = FeatureMapKind::Hedgehog});
  EXPECT_EQ(m->parameters().size(), 4u);
  Generator gen(7);
  const Tensor z = randn({2, kH, 3, kD}, kFloat64, &gen);
  const Tensor phi = m->forward(z, Role::Query);
  EXPECT_TRUE(all_close(phi, softmax(cat({z, neg(z)}, -1), -1), 1e-12));
  EXPECT_TRUE(all_close(sum(phi, {-1}), ones({2, kH, 3}, kFloat64), 1e-12));
  EXPECT_EQ(m->feature_dim(), 2 * kD);
}

// base (x) sigmoid(.)/sqrt(m2): with a non-negative base, 0 <= phi(q).phi(k) <= base(q).base(k).
TEST(LinearFeatureMaps, ProductStaysNonNegativeAndBelowItsBase) {
  for (const FeatureMapKind base_kind : {FeatureMapKind::Relu, FeatureMapKind::NormalizedExp, FeatureMapKind::Hedgehog}) {
    const FeatureMapConfig c{.kind = FeatureMapKind::Product, .product_base = base_kind, .product_second_dim = 3};
    auto m = map_of(c);
    auto base = map_of({.kind = base_kind});
    EXPECT_EQ(m->feature_dim(), base->feature_dim() * 3);
    Generator gen(8);
    const Tensor q = randn({2, kH, 7, kD}, kFloat64, &gen), k = randn({2, kH, 7, kD}, kFloat64, &gen);
    const Tensor a = matmul(m->forward(q, Role::Query), transpose(m->forward(k, Role::Key), -1, -2));
    const Tensor a_base = matmul(base->forward(q, Role::Query), transpose(base->forward(k, Role::Key), -1, -2));
    EXPECT_GE(min(a).item(), 0.0) << feature_map_name(base_kind);
    EXPECT_LE(max(a - a_base).item(), 0.0) << feature_map_name(base_kind);
    // The base's key shift passes through: only normalized exp has one.
    EXPECT_EQ(m->key_log_shift(k).defined(), base_kind == FeatureMapKind::NormalizedExp);
  }
  EXPECT_LINEA_ERROR(feature_dim_of({.kind = FeatureMapKind::Product, .product_base = FeatureMapKind::Product}, 4),
                     "product");
}

TEST(LinearFeatureMaps, ConfigErrors) {
  EXPECT_LINEA_ERROR(feature_dim_of({.kind = FeatureMapKind::Relu, .num_features = 8}, 4), "random maps only");
  EXPECT_LINEA_ERROR(parse_feature_map("softmax"), "unknown feature map", "hedgehog");
}

// ---- gates --------------------------------------------------------------------------------------

TEST(LinearGates, LogAddExpIsExactAndStable) {
  const Tensor a = tensor({0.3, -2.0, 1000.0, -1000.0}, {4}, kFloat64).requires_grad_();
  const Tensor b = tensor({-1.2, 5.0, 1000.0, -999.0}, {4}, kFloat64).requires_grad_();
  const Tensor y = logaddexp(a, b);
  const std::vector<double> v = y.to_vector<double>();
  EXPECT_NEAR(v[0], std::log(std::exp(0.3) + std::exp(-1.2)), 1e-14);
  EXPECT_NEAR(v[1], std::log(std::exp(-2.0) + std::exp(5.0)), 1e-14);
  EXPECT_NEAR(v[2], 1000.0 + std::log(2.0), 1e-12);
  EXPECT_NEAR(v[3], -999.0 + std::log1p(std::exp(-1.0)), 1e-12);
  // d/da = e^a / (e^a + e^b), also at a tie.
  const auto g = grad(sum(y), {a, b});
  EXPECT_TRUE(all_close(g[0], exp(a - y), 1e-12));
  EXPECT_TRUE(all_close(g[1], exp(b - y), 1e-12));
}

TEST(LinearGates, RefinedGateMatchesItsDefinitionAndStaysFinite) {
  Generator gen(9);
  const Tensor a = randn({50}, kFloat64, &gen) * 3.0, c = randn({50}, kFloat64, &gen) * 3.0;
  const Tensor g = sigmoid(a), r = sigmoid(c);
  const Tensor direct = (1.0 - r) * g * g + r * (1.0 - (1.0 - g) * (1.0 - g));
  EXPECT_TRUE(all_close(exp(refined_log_gate(a, c)), direct, 1e-12, 1e-15));
  EXPECT_TRUE(all_close(exp(refined_log_gate(a, c)), g * (g + 2.0 * r * (1.0 - g)), 1e-12, 1e-15));
  // Saturated: as a -> -inf, f = g (g + 2 r (1 - g)) -> 2 r g, so log f -> a + log(2r) (= a for
  // r = 1/2), where the direct formula underflows to log 0; as a -> +inf, f -> 1. No NaN either way.
  const Tensor extreme = tensor({-500.0, 500.0}, {2}, kFloat64).requires_grad_();
  const Tensor refine = tensor({0.0, 0.0}, {2}, kFloat64).requires_grad_();
  const Tensor lf = refined_log_gate(extreme, refine);
  const std::vector<double> v = lf.to_vector<double>();
  EXPECT_NEAR(v[0], -500.0, 1e-9);
  EXPECT_NEAR(v[1], 0.0, 1e-12);
  for (const Tensor& gr : grad(sum(lf), {extreme, refine}))
    for (double x : gr.to_vector<double>()) EXPECT_TRUE(std::isfinite(x));
}

GateOutput run_gate(const GateConfig& c, const Tensor& x, int64_t m = 3, int64_t dv = 5) {
  Generator gen(10);
  auto gate = make_gate(c, x.size(-1), kH, m, dv, gen);
  gate->to(kFloat64);
  return gate->forward(x);
}

TEST(LinearGates, ShapesDimsAndFloor) {
  Generator gen(11);
  const Tensor x = randn({2, 7, 6}, kFloat64, &gen);
  const Shape lead{2, kH, 7};
  auto shape_of = [&](int64_t last) {
    Shape s = lead;
    s.push_back(last);
    return s;
  };
  const GateOutput scalar = run_gate({.kind = GateKind::Scalar}, x);
  EXPECT_EQ(scalar.gk.shape(), shape_of(1));
  EXPECT_FALSE(scalar.gv.defined());
  // 1 - g with g = exp(gk): decay and input weight add up to one.
  EXPECT_TRUE(all_close(scalar.key_scale + exp(scalar.gk), ones(shape_of(1), kFloat64), 1e-14));
  const GateOutput fast = run_gate({.kind = GateKind::FastDecay}, x);
  EXPECT_EQ(fast.gk.shape(), shape_of(3));
  EXPECT_EQ(fast.gv.shape(), shape_of(5));
  const GateOutput gla = run_gate({.kind = GateKind::GLA, .gla_low_rank = 2}, x);
  EXPECT_EQ(gla.gk.shape(), shape_of(3));
  const GateOutput value = run_gate({.kind = GateKind::ReGLA}, x);
  EXPECT_EQ(value.gv.shape(), shape_of(5));
  EXPECT_FALSE(value.gk.defined());
  const GateOutput key = run_gate({.kind = GateKind::ReGLA, .regla_dim = DecayDim::Key}, x);
  EXPECT_EQ(key.gk.shape(), shape_of(3));
  EXPECT_FALSE(key.gv.defined());
  for (const Tensor& g : {scalar.gk, fast.gk, fast.gv, gla.gk, value.gv, key.gk}) EXPECT_LE(max(g).item(), 0.0);

  // GLA: logsigmoid / 16, near 0 for a zero bias (slow decay).
  EXPECT_GT(min(gla.gk).item(), std::log(0.5) / 16.0 - 0.05);
  // A bias of -40 saturates every gate at 0: the floor holds the log decay at -20 (Fast Decay:
  // each factor), except GLA whose 1/16 keeps it at about -40/16.
  for (const GateKind kind : {GateKind::Scalar, GateKind::FastDecay, GateKind::ReGLA}) {
    const GateOutput out = run_gate({.kind = kind, .bias_init = -40.0}, x);
    const Tensor g = out.gv.defined() ? out.gv : out.gk;
    EXPECT_NEAR(min(g).item(), -20.0, 1e-12) << gate_name(kind);
    EXPECT_NEAR(max(g).item(), -20.0, 1e-12) << gate_name(kind);
  }
  const GateOutput floored = run_gate({.kind = GateKind::ReGLA, .log_decay_floor = -5.0, .bias_init = -40.0}, x);
  EXPECT_NEAR(min(floored.gv).item(), -5.0, 1e-12);
  EXPECT_FALSE(make_gate({.kind = GateKind::None}, 6, kH, 3, 5, gen));
  EXPECT_LINEA_ERROR(make_gate({.kind = GateKind::GLA, .log_decay_floor = 1.0}, 6, kH, 3, 5, gen), "negative");
  EXPECT_EQ(parse_gate("rfa"), GateKind::Scalar);
  EXPECT_EQ(parse_gate(gate_name(GateKind::ReGLA)), GateKind::ReGLA);
}

// ---- the key max --------------------------------------------------------------------------------

TEST(LinearKeyMax, RunningMaxIsACumulativeMax) {
  Generator gen(12);
  for (const int64_t n : {1, 2, 3, 7, 16, 33}) {
    const Tensor x = randn({2, n, 3}, kFloat64, &gen);
    std::vector<double> v = x.to_vector<double>(), expected(v.size());
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 3; ++c) {
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t t = 0; t < n; ++t) {
          const size_t i = static_cast<size_t>((b * n + t) * 3 + c);
          m = std::max(m, v[i]);
          expected[i] = m;
        }
      }
    EXPECT_TRUE(all_close(running_max(x, 1), from_vector(expected, x.shape()), 0, 0)) << "n = " << n;
  }
}

// The gradient goes to the position holding the running max, the earliest one on ties.
TEST(LinearKeyMax, RunningMaxGradientGoesToTheEarliestMax) {
  const Tensor x = tensor({1.0, 3.0, 2.0, 3.0, 0.0, 5.0, 5.0}, {7}, kFloat64).requires_grad_();
  const Tensor m = running_max(x, 0);
  EXPECT_EQ(m.to_vector<double>(), (std::vector<double>{1, 3, 3, 3, 3, 5, 5}));
  const auto g = grad(sum(m * tensor({1, 10, 100, 1000, 10000, 1e5, 1e6}, {7}, kFloat64)), {x});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{1, 11110, 0, 0, 0, 1.1e6, 0}));
}

// Normalizing a sequence in two pieces (the second given the first's last max) equals doing it
// at once; the decays telescope: exp(sum_{r in (s, t]} lambda_r) = exp(m_s - m_t).
TEST(LinearKeyMax, PrefixNormalizationSplitsAndTelescopes) {
  Generator gen(13);
  const Tensor mu = randn({2, kH, 12, 1}, kFloat64, &gen);
  const KeyNormalization whole = normalize_keys(mu, KeyMaxMode::Prefix, Tensor());
  const Tensor m = running_max(mu, 2);
  EXPECT_TRUE(all_close(whole.key_scale, exp(mu - m)));
  EXPECT_TRUE(all_close(cumsum(whole.log_decay, 2), narrow(m, 2, 0, 1) - m, 1e-14, 1e-14));
  EXPECT_TRUE(all_close(whole.last_max, narrow(m, 2, 11, 1)));
  const KeyNormalization first = normalize_keys(narrow(mu, 2, 0, 5), KeyMaxMode::Prefix, Tensor());
  const KeyNormalization second = normalize_keys(narrow(mu, 2, 5, 7), KeyMaxMode::Prefix, first.last_max);
  EXPECT_TRUE(all_close(cat({first.key_scale, second.key_scale}, 2), whole.key_scale));
  EXPECT_TRUE(all_close(cat({first.log_decay, second.log_decay}, 2), whole.log_decay));
  // Global: one max for the whole sequence, no decay.
  const KeyNormalization global = normalize_keys(mu, KeyMaxMode::Global, Tensor());
  EXPECT_FALSE(global.log_decay.defined());
  EXPECT_TRUE(all_close(global.key_scale, exp(mu - amax(mu, {2}, true))));
  EXPECT_EQ(parse_key_max("global"), KeyMaxMode::Global);
}

}  // namespace
}  // namespace linea::nn::linear
