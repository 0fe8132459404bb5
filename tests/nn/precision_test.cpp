// Mixed precision (nn/precision.h): under a bf16 scope a Linear layer and the tied LM head compute
// their products from bfloat16-rounded inputs and weights, with float32 results for float32
// input and bfloat16 results for bfloat16 input (checked against the product written out here,
// on fresh random values); matmul_bf16's gradients are the same kind of product at any rank and
// through broadcasting, each in its operand's dtype; the weights stay float32 and receive float32
// gradients; the model's training forward runs softmax attention and the MLP on bfloat16
// activations and gives bfloat16 logits; float64 layers ignore the setting, the scope nests and
// restores, and a bad name is a clear error.
#include <cmath>
#include <random>

#include "nn/layers/linear.h"
#include "nn/layers/mlp.h"
#include "nn/model.h"
#include "nn/precision.h"
#include "tests/tensor/bf16_cases.h"
#include "tests/test_util.h"

namespace linea::nn {
namespace {

using linea::testing::all_close;

Tensor rounded(const Tensor& x) { return to(to(x, kBFloat16), kFloat32); }

TEST(Precision, Bf16LinearRoundsItsInputAndWeightOnly) {
  Generator gen(std::random_device{}());
  Linear layer(48, 24, gen);
  const Tensor x = randn({3, 5, 48}, kFloat32, &gen);
  const Tensor fp32 = layer.forward(x);
  Tensor bf16;
  {
    const PrecisionScope scope(Precision::BFloat16);
    EXPECT_EQ(product_precision(), Precision::BFloat16);
    bf16 = layer.forward(x);
  }
  EXPECT_EQ(product_precision(), Precision::Float32);
  EXPECT_EQ(bf16.dtype(), kFloat32);
  // The float32 product of the rounded operands, plus the float32 bias.
  EXPECT_TRUE(all_close(bf16, matmul(rounded(x), t(rounded(layer.weight))) + layer.bias, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(bf16, fp32, 3e-2, 3e-2));
  EXPECT_FALSE(all_close(bf16, fp32, 1e-5, 1e-6));  // rounded: not the float32 result
}

TEST(Precision, WeightsStayFloat32AndGetFloat32Gradients) {
  Generator gen(std::random_device{}());
  Linear layer(32, 16, gen);
  const Tensor x = randn({8, 32}, kFloat32, &gen), dy = randn({8, 16}, kFloat32, &gen);
  std::vector<Tensor> g32, g16;
  g32 = grad(layer.forward(x), {layer.weight, layer.bias}, dy);
  {
    const PrecisionScope scope(Precision::BFloat16);
    g16 = grad(layer.forward(x), {layer.weight, layer.bias}, dy);
  }
  EXPECT_EQ(layer.weight.dtype(), kFloat32);
  EXPECT_EQ(g16[0].dtype(), kFloat32);
  // dW = bf16(dy)^T bf16(x) in float32; the bias gradient skips the product: equal to float32's.
  EXPECT_TRUE(all_close(g16[0], matmul(t(rounded(dy)), rounded(x)), 1e-5, 1e-6));
  EXPECT_TRUE(all_close(g16[1], g32[1], 0, 0));
  // And near float32's: each term dy_i x_j loses at most a relative 2u + u^2 to rounding both
  // factors (u = 2^-8, bfloat16's unit roundoff), so the sum is off by at most that share of the
  // sum of |terms| (plus float32's own rounding). A bound from the inputs, not a guessed tolerance:
  // random draws made the old fixed 3e-2 fail where cancellation left a small gradient.
  const double u = std::ldexp(1.0, -8);
  const Tensor bound = matmul(t(abs(dy)), abs(x)) * (2 * u + u * u) + 1e-5;
  const auto excess = (abs(g16[0] - g32[0]) - bound).to_vector<double>();
  for (size_t i = 0; i < excess.size(); ++i) EXPECT_LE(excess[i], 0.0) << "element " << i;
}

TEST(Precision, MatmulBf16GradientsAreBf16Products) {
  Generator gen(std::random_device{}());
  const Tensor a = randn({2, 5, 7}, kFloat32, &gen).requires_grad_(), b = randn({7, 3}, kFloat32, &gen).requires_grad_();
  const Tensor dy = randn({2, 5, 3}, kFloat32, &gen);
  const Tensor y = matmul_bf16(a, b);
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_TRUE(all_close(y, matmul(rounded(a), rounded(b)), 1e-5, 1e-6));
  const auto g = grad(y, {a, b}, dy);
  EXPECT_TRUE(all_close(g[0], matmul(rounded(dy), t(rounded(b))), 1e-5, 1e-6));
  EXPECT_TRUE(all_close(g[1], sum(matmul(transpose(rounded(a), 1, 2), rounded(dy)), {0}), 1e-5, 1e-6));
  // Vectors as matmul takes them, and a bfloat16 operand used as it is.
  const Tensor v = randn({7}, kFloat32, &gen);
  EXPECT_TRUE(all_close(matmul_bf16(to(v, kBFloat16), b), matmul(rounded(v), rounded(b)), 1e-5, 1e-6));
  EXPECT_LINEA_ERROR(matmul_bf16(to(a, kFloat64), to(b, kFloat64)), "matmul_bf16", "float32 or bfloat16");
  EXPECT_LINEA_ERROR(matmul_bf16(a, randn({6, 3}, kFloat32, &gen)), "matmul_bf16", "inner sizes differ");
}

// bfloat16 activations: the product rounded once into bfloat16; the activation's gradient in
// bfloat16, the weight's in float32 (never rounded to bfloat16).
TEST(Precision, MatmulBf16KeepsBfloat16ActivationsAndFloat32WeightGradients) {
  Generator gen(std::random_device{}());
  const Tensor x = to(randn({2, 5, 7}, kFloat32, &gen), kBFloat16).requires_grad_();
  const Tensor w = randn({3, 7}, kFloat32, &gen).requires_grad_();
  const Tensor dy = to(randn({2, 5, 3}, kFloat32, &gen), kBFloat16);
  const Tensor y = matmul_bf16(x, t(w), kBFloat16);
  EXPECT_EQ(y.dtype(), kBFloat16);
  const double unit = std::ldexp(1.0, -7);
  EXPECT_TRUE(all_close(y, matmul(to(x, kFloat32), t(rounded(w))), unit, 1e-6));
  const auto g = grad(y, {x, w}, dy);
  EXPECT_EQ(g[0].dtype(), kBFloat16);
  EXPECT_EQ(g[1].dtype(), kFloat32);
  EXPECT_TRUE(all_close(g[0], matmul(to(dy, kFloat32), rounded(w)), unit, 1e-6));
  const Tensor x2 = reshape(to(x, kFloat32), {10, 7}), dy2 = reshape(to(dy, kFloat32), {10, 3});
  EXPECT_TRUE(all_close(g[1], matmul(t(dy2), x2), 1e-5, 1e-6));
  EXPECT_LINEA_ERROR(matmul_bf16(x, t(w), kFloat64), "matmul_bf16", "float32 or bfloat16");

  // A Linear layer on bfloat16 input under the scope: bfloat16 out, the bias rounded into it. Three
  // roundings (the product, the bias, their sum), each within u = 2^-8 of its value: where the two
  // cancel, the first two dominate.
  Linear layer(7, 3, gen);
  const PrecisionScope scope(Precision::BFloat16);
  const Tensor out = layer.forward(detach(x));
  EXPECT_EQ(out.dtype(), kBFloat16);
  const Tensor product = matmul(to(detach(x), kFloat32), t(rounded(layer.weight))), exact = product + layer.bias;
  const Tensor bound = std::ldexp(1.01, -8) * (abs(product) + abs(layer.bias) + abs(exact)) + 1e-6;
  EXPECT_TRUE(linea::testing::within_bound(out, exact, bound));
}

// A branch on bfloat16 activations ends in the residual stream's dtype: the MLP's last product
// writes float32 (never rounded to bfloat16), near the float32 MLP's output.
TEST(Precision, ABranchsLastProductWritesTheStreamsDtype) {
  Generator gen(std::random_device{}());
  MLP mlp(16, 40, gen);
  const Tensor x = randn({2, 5, 16}, kFloat32, &gen);
  const Tensor fp32 = mlp.forward(x);
  const PrecisionScope scope(Precision::BFloat16);
  const Tensor y = mlp.forward(to(x, kBFloat16));
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_TRUE(all_close(y, fp32, 5e-2, 5e-2));
  EXPECT_EQ(stream_dtype(to(x, kBFloat16)), kFloat32);
  EXPECT_EQ(activation_dtype(x), kBFloat16);
}

TEST(Precision, Float64IgnoresTheScopeAndScopesNest) {
  Generator gen(std::random_device{}());
  Linear layer(12, 7, gen);
  layer.to(kFloat64);
  const Tensor x = randn({4, 12}, kFloat64, &gen);
  const Tensor expected = layer.forward(x);
  {
    const PrecisionScope outer(Precision::BFloat16);
    EXPECT_TRUE(all_close(layer.forward(x), expected, 0, 0));
    {
      const PrecisionScope inner(Precision::Float32);
      EXPECT_EQ(product_precision(), Precision::Float32);
    }
    EXPECT_EQ(product_precision(), Precision::BFloat16);
  }
  EXPECT_EQ(parse_precision("bf16", "test"), Precision::BFloat16);
  EXPECT_EQ(precision_name(Precision::Float32), "fp32");
  EXPECT_LINEA_ERROR(parse_precision("fp16", "train"), "train", "unknown precision 'fp16'", "fp32, bf16");
}

// The training forward under the scope: ReGLA's block (no bfloat16 scan) on float32 activations
// with bfloat16 products, softmax attention's block and every MLP on bfloat16 activations, the
// tied head's logits bfloat16; the loss (float32) near float32's, and every parameter's gradient
// float32 and finite. With RoPE, without, and with residual dropout (its masks drawn in float32).
TEST(Precision, TheModelRunsOnBf16Activations) {
  for (const std::string variant : {"rope", "no rope", "dropout"}) {
    ModelConfig c;
    c.vocab_size = 40;
    c.d_model = 16;
    c.heads = 2;
    c.pattern = "RS";
    if (variant == "no rope") c.layers["S"]["rope"] = false;
    if (variant == "dropout") c.dropout = 0.1;
    Generator gen(std::random_device{}());
    LanguageModel model(c, gen);
    const Tensor tokens = randint(0, 40, {2, 9}, kCPU, &gen), targets = randint(0, 40, {2, 9}, kCPU, &gen);
    const Tensor fp32 = model.forward(tokens);
    const double loss32 = cross_entropy(fp32, targets).item();
    const PrecisionScope scope(Precision::BFloat16);
    const Tensor bf16 = model.forward(tokens);
    EXPECT_EQ(bf16.dtype(), kBFloat16) << variant;
    if (variant != "dropout") {  // the same masks are not drawn twice
      EXPECT_TRUE(all_close(bf16, fp32, 5e-2, 5e-2)) << variant;
      EXPECT_FALSE(all_close(to(bf16, kFloat32), fp32, 1e-5, 1e-6)) << variant;
    }
    const Tensor loss = cross_entropy(bf16, targets);
    EXPECT_EQ(loss.dtype(), kFloat32);
    if (variant != "dropout") EXPECT_NEAR(loss.item(), loss32, 2e-2 * loss32) << variant;
    const auto grads = grad(loss, model.parameters());
    for (size_t i = 0; i < grads.size(); ++i) {
      ASSERT_TRUE(grads[i].defined()) << variant << " parameter " << i;
      EXPECT_EQ(grads[i].dtype(), kFloat32) << variant << " parameter " << i;
      EXPECT_TRUE(std::isfinite(sum(abs(grads[i])).item())) << variant << " parameter " << i;
    }
  }
}

}  // namespace
}  // namespace linea::nn
