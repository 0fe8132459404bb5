// fused_linear (autograd/ops.h), a decoding step's product with its input norm, activation, gated
// unit and residual in one kernel, against an oracle written here from the contract
// (tensor/backend_kernels.def) with plain loops in double: every norm, every activation, gated
// and not, with and without biases and residual, at awkward widths and row counts (one row, the
// most one kernel takes, one more, which runs the composite ops), strided input rows. Then: the
// kernel and the composite agree, grad mode records the composite, and bad inputs are named errors.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "tensor/fused_linear_math.h"
#include "tests/test_util.h"

namespace linea::testing {
namespace {

struct Case {
  int64_t rows, in, out;
  RowNorm norm = RowNorm::None;
  std::optional<UnaryOp> activation;
  bool bias = false, gated = false, residual = false;

  std::string name() const {
    return std::to_string(rows) + "x" + std::to_string(in) + "->" + std::to_string(out) + " norm " +
           std::to_string(static_cast<int>(norm)) + (activation ? " act " + std::to_string(static_cast<int>(*activation)) : "") +
           (bias ? " bias" : "") + (gated ? " gated" : "") + (residual ? " residual" : "");
  }
};

FusedLinearOptions options_of(const Case& c) {
  return {.norm = c.norm, .norm_eps = 1e-5, .activate = c.activation.has_value(),
          .activation = c.activation.value_or(UnaryOp::GeluErf)};
}

// Fresh random inputs; x's rows are every other row of a larger tensor (a row stride) when
// `strided`. The norm's gain is drawn around 1, its shift around 0.
FusedLinearInputs draw(const Case& c, DType dtype, Generator& gen, bool strided = false) {
  FusedLinearInputs in;
  in.x = strided ? narrow(randn({c.rows, 2 * c.in}, dtype, &gen), 1, 1, c.in) : randn({c.rows, c.in}, dtype, &gen) * 1.5;
  in.weight = randn({c.out, c.in}, dtype, &gen) * (1.0 / std::sqrt(static_cast<double>(c.in)));
  if (c.bias) in.bias = randn({c.out}, dtype, &gen);
  if (c.gated) {
    in.up_weight = randn({c.out, c.in}, dtype, &gen) * (1.0 / std::sqrt(static_cast<double>(c.in)));
    if (c.bias) in.up_bias = randn({c.out}, dtype, &gen);
  }
  if (c.norm != RowNorm::None) in.norm_weight = randn({c.in}, dtype, &gen) * 0.3 + 1.0;
  if (c.norm == RowNorm::Layer) in.norm_bias = randn({c.in}, dtype, &gen) * 0.3;
  if (c.residual) in.residual = randn({c.rows, c.out}, dtype, &gen);
  return in;
}

std::vector<double> values(const Tensor& t) { return t.defined() ? contiguous(t).to_vector<double>() : std::vector<double>(); }

// The contract in double.
std::vector<double> oracle(const Case& c, const FusedLinearInputs& in) {
  const auto x = values(in.x), w = values(in.weight), b = values(in.bias), u = values(in.up_weight),
             ub = values(in.up_bias), g = values(in.norm_weight), s = values(in.norm_bias), r = values(in.residual);
  std::vector<double> out(c.rows * c.out);
  for (int64_t n = 0; n < c.rows; ++n) {
    std::vector<double> row(x.begin() + n * c.in, x.begin() + (n + 1) * c.in);
    if (c.norm != RowNorm::None) {
      double mean = 0, sq = 0;
      if (c.norm == RowNorm::Layer) {
        for (double v : row) mean += v;
        mean /= c.in;
      }
      for (double v : row) sq += (v - mean) * (v - mean);
      const double rstd = 1.0 / std::sqrt(sq / c.in + 1e-5);
      for (int64_t i = 0; i < c.in; ++i) row[i] = (row[i] - mean) * rstd * g[i] + (s.empty() ? 0.0 : s[i]);
    }
    for (int64_t j = 0; j < c.out; ++j) {
      double a = b.empty() ? 0.0 : b[j], up = ub.empty() ? 0.0 : ub[j];
      for (int64_t i = 0; i < c.in; ++i) {
        a += w[j * c.in + i] * row[i];
        if (c.gated) up += u[j * c.in + i] * row[i];
      }
      if (c.activation) {
        switch (*c.activation) {
          case UnaryOp::Relu: a = a > 0 ? a : 0; break;
          case UnaryOp::GeluTanh: a = 0.5 * a * (1 + std::tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))); break;
          case UnaryOp::GeluErf: a = 0.5 * a * (1 + std::erf(a / std::sqrt(2.0))); break;
          default: a = a / (1 + std::exp(-a)); break;
        }
      }
      if (c.gated) a *= up;
      if (c.residual) a += r[n * c.out + j];
      out[n * c.out + j] = a;
    }
  }
  return out;
}

// Rounding of float32 dot products of `in` terms: a few ulps of the sum of |terms|, which the
// draws keep near sqrt(in) times the values' scale.
double tolerance(DType dtype, int64_t in) { return (dtype == kFloat64 ? 1e-12 : 2e-6) * (1.0 + std::sqrt(static_cast<double>(in))); }

void expect_oracle(const Case& c, DType dtype, uint64_t seed, bool strided = false) {
  Generator gen(seed);
  const FusedLinearInputs in = draw(c, dtype, gen, strided);
  const Tensor got = fused_linear(in, options_of(c));
  ASSERT_EQ(got.shape(), Shape({c.rows, c.out})) << c.name();
  const Tensor want = from_vector(oracle(c, in), {c.rows, c.out});
  const double tol = tolerance(dtype, c.in);
  EXPECT_TRUE(all_close(to(got, kFloat64), want, tol, tol)) << c.name() << (strided ? " strided" : "");
}

std::vector<Case> cases() {
  using enum UnaryOp;
  std::vector<Case> all;
  for (int64_t rows : {int64_t{1}, int64_t{3}, kFusedLinearMaxRows, kFusedLinearMaxRows + 1})
    for (auto [in, out] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {17, 5}, {64, 33}, {130, 7}}) {
      all.push_back({rows, in, out});
      all.push_back({rows, in, out, RowNorm::RMS, Silu, false, true, true});
      all.push_back({rows, in, out, RowNorm::Layer, GeluErf, true, false, false});
      all.push_back({rows, in, out, RowNorm::RMS, GeluTanh, true, false, true});
      all.push_back({rows, in, out, RowNorm::None, Relu, true, true, true});
      all.push_back({rows, in, out, RowNorm::Layer, std::nullopt, false, false, true});
    }
  return all;
}

TEST(FusedLinear, MatchesTheContractInFloat64) {
  NoGradGuard no_grad;
  uint64_t seed = 1;
  for (const Case& c : cases()) expect_oracle(c, kFloat64, seed++);
}

TEST(FusedLinear, MatchesTheContractInFloat32) {
  NoGradGuard no_grad;
  uint64_t seed = 100;
  for (const Case& c : cases()) expect_oracle(c, kFloat32, seed++);
}

TEST(FusedLinear, ReadsStridedRows) {
  NoGradGuard no_grad;
  expect_oracle({3, 24, 10, RowNorm::RMS, UnaryOp::Silu, true, true, true}, kFloat64, 7, /*strided=*/true);
  expect_oracle({1, 9, 4, RowNorm::Layer}, kFloat32, 8, /*strided=*/true);
}

TEST(FusedLinear, KernelAndCompositeAgree) {
  NoGradGuard no_grad;
  Generator gen(11);
  const Case c{5, 48, 20, RowNorm::RMS, UnaryOp::Silu, true, true, true};
  for (DType dtype : {kFloat64, kFloat32}) {
    const FusedLinearInputs in = draw(c, dtype, gen);
    const double tol = tolerance(dtype, c.in);
    EXPECT_TRUE(all_close(fused_linear(in, options_of(c)), fused_linear_composite(in, options_of(c)), tol, tol));
  }
}

TEST(FusedLinear, GradModeRecordsTheComposite) {
  Generator gen(12);
  const Case c{2, 6, 3, RowNorm::Layer, UnaryOp::GeluErf, true, false, true};
  FusedLinearInputs in = draw(c, kFloat64, gen);
  in.weight = detach(in.weight).requires_grad_(true);
  const Tensor y = fused_linear(in, options_of(c));
  ASSERT_TRUE(y.requires_grad());
  backward(sum(y * y));
  ASSERT_TRUE(in.weight.grad().defined());
  EXPECT_EQ(in.weight.grad().shape(), in.weight.shape());
}

TEST(FusedLinear, EmptyRowsGiveAnEmptyResult) {
  NoGradGuard no_grad;
  Generator gen(13);
  const FusedLinearInputs in = draw({0, 8, 3, RowNorm::RMS}, kFloat32, gen);
  EXPECT_EQ(fused_linear(in, options_of({0, 8, 3, RowNorm::RMS})).shape(), Shape({0, 3}));
}

TEST(FusedLinear, BadInputsAreNamedErrors) {
  NoGradGuard no_grad;
  Generator gen(14);
  const Case c{2, 8, 4, RowNorm::RMS, UnaryOp::Silu, true, true, true};
  const FusedLinearOptions options = options_of(c);
  auto with = [&](auto change) {
    FusedLinearInputs in = draw(c, kFloat32, gen);
    change(in);
    return in;
  };
  EXPECT_LINEA_ERROR(fused_linear(with([](auto& in) { in.x = reshape(in.x, {16}); }), options), "fused_linear", "(rows, in)");
  EXPECT_LINEA_ERROR(fused_linear(with([](auto& in) { in.weight = narrow(in.weight, 1, 0, 7); }), options),
                     "fused_linear", "weight");
  EXPECT_LINEA_ERROR(fused_linear(with([](auto& in) { in.bias = narrow(in.bias, 0, 0, 3); }), options), "bias");
  EXPECT_LINEA_ERROR(fused_linear(with([](auto& in) { in.residual = transpose(in.residual, 0, 1); }), options),
                     "residual");
  EXPECT_LINEA_ERROR(fused_linear(with([](auto& in) { in.up_weight = to(in.up_weight, kFloat64); }), options),
                     "fused_linear");
  EXPECT_LINEA_ERROR(fused_linear(with([](auto& in) { in.up_weight = Tensor(); }), options), "up_bias");
  EXPECT_LINEA_ERROR(fused_linear(with([](auto& in) { in.norm_bias = in.norm_weight; }), options), "norm bias");
  FusedLinearOptions exp_activation = options;
  exp_activation.activation = UnaryOp::Exp;
  EXPECT_LINEA_ERROR(fused_linear(with([](auto&) {}), exp_activation), "activation");
  FusedLinearOptions no_norm = options;
  no_norm.norm = RowNorm::None;
  EXPECT_LINEA_ERROR(fused_linear(with([](auto&) {}), no_norm), "without a norm");
  EXPECT_LINEA_ERROR(fused_linear(with([](auto& in) { in.x = to(in.x, kInt64); }), options), "fused_linear");
}

}  // namespace
}  // namespace linea::testing
