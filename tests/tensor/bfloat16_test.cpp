// bfloat16 (tensor/bfloat16.h) on the CPU: rounding to nearest even from float32 and float64
// against an oracle written here from the definition (the two neighbours, exact distances), on
// every bfloat16 bit pattern and on fresh random floats and doubles, with the cases that break a
// naive double -> float -> bfloat16 chain (double rounding); the special values; and the tensor
// ops that take it: conversion both ways with its gradient, fill, comparisons, where, gather,
// index_select, the reductions and the elementwise math (in float32, rounded once: exactly the
// float32 result rounded) and matmul, held to a bound derived from bfloat16's and float32's
// rounding; printing; and a clear error from the kernels without it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tensor/backend.h"
#include "tests/tensor/bf16_matmul_bound.h"
#include "tests/tensor/bf16_cases.h"
#include "tests/test_util.h"

namespace linea::testing {
namespace {

float float_of_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint32_t bits_of_float(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

double bf16_value(uint16_t bits) { return float_of_bits(static_cast<uint32_t>(bits) << 16); }

// The oracle: the bfloat16 nearest to x (finite, not NaN), ties to the even bit pattern, by exact
// distances in long double to the two bfloat16 values around x (float32 and double values, and
// the bfloat16 neighbours, differ by far less than long double's precision can lose).
uint16_t nearest_even(long double x) {
  const bool negative = std::signbit(static_cast<double>(x));
  const long double a = negative ? -x : x;
  const long double max_finite = bf16_value(0x7f7f);
  const long double past_max = max_finite + (max_finite - bf16_value(0x7f7e)) / 2;  // halfway to 2^128
  uint16_t magnitude;
  if (a >= past_max) {
    magnitude = 0x7f80;  // infinity (a tie at the halfway point goes to the even 0x7f80)
  } else {
    uint16_t lo = 0;  // the largest bfloat16 magnitude <= a: binary search over the ordered patterns
    for (uint16_t step = 0x4000; step > 0; step >>= 1)
      if (lo + step <= 0x7f7f && bf16_value(static_cast<uint16_t>(lo + step)) <= a) lo = static_cast<uint16_t>(lo + step);
    const uint16_t hi = static_cast<uint16_t>(lo + 1);
    const long double below = a - bf16_value(lo), above = bf16_value(hi) - a;
    magnitude = below < above ? lo : above < below ? hi : ((lo & 1) ? hi : lo);
  }
  return static_cast<uint16_t>(magnitude | (negative ? 0x8000 : 0));
}

bool is_nan_bits(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

TEST(BFloat16, EveryPatternWidensExactlyAndRoundsBackToItself) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float wide = bfloat16::from_bits(bits);
    if (is_nan_bits(bits)) {
      EXPECT_TRUE(std::isnan(wide));
      EXPECT_TRUE(is_nan_bits(bfloat16(wide).bits));
      EXPECT_TRUE(is_nan_bits(bfloat16(static_cast<double>(wide)).bits));
      continue;
    }
    uint32_t wide_bits;
    std::memcpy(&wide_bits, &wide, sizeof wide_bits);
    ASSERT_EQ(wide_bits, b << 16) << "widening is exact: the pattern shifted up";
    ASSERT_EQ(bfloat16(wide).bits, bits) << "pattern " << b;
    ASSERT_EQ(bfloat16(static_cast<double>(wide)).bits, bits) << "pattern " << b;
  }
}

TEST(BFloat16, RandomFloatsRoundToNearestEven) {
  std::mt19937 rng(std::random_device{}());
  int checked = 0;
  for (int i = 0; i < 400000; ++i) {
    uint32_t u = rng();
    // Half the draws near a tie: the 16 dropped bits are 0x8000 give or take a few units.
    if (i % 2) u = (u & 0xffff0000u) | static_cast<uint32_t>(0x8000 + static_cast<int>(rng() % 5) - 2);
    const float f = float_of_bits(u);
    if (std::isnan(f)) continue;
    ASSERT_EQ(bfloat16(f).bits, nearest_even(f)) << "float bits " << std::hex << u;
    ++checked;
  }
  EXPECT_GT(checked, 390000);
}

TEST(BFloat16, RandomDoublesRoundOnceNotTwice) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> exponent(-130.0, 128.5);
  for (int i = 0; i < 200000; ++i) {
    const double mantissa = std::uniform_real_distribution<double>(1.0, 2.0)(rng);
    const double d = (rng() & 1 ? -1 : 1) * std::ldexp(mantissa, static_cast<int>(exponent(rng)));
    ASSERT_EQ(bfloat16(d).bits, nearest_even(d)) << "double " << d;
  }
  // Just above and below a tie between two bfloat16 values, closer than float32 can tell: the
  // double rounds to float32 exactly onto the tie, so rounding twice would pick the even side.
  for (uint16_t even : {uint16_t{0x3f80}, uint16_t{0x4122}, uint16_t{0xc2c4}, uint16_t{0x0002}}) {
    const double x = bf16_value(even), next = bf16_value(static_cast<uint16_t>(even + 1));
    const double tie = (x + next) / 2, nudge = std::abs(next - x) * 1e-9;
    EXPECT_EQ(bfloat16(tie).bits, even);
    const double away = tie + (x < 0 ? -nudge : nudge), toward = tie - (x < 0 ? -nudge : nudge);
    EXPECT_EQ(static_cast<double>(static_cast<float>(away)), tie);  // float32 cannot see the nudge
    EXPECT_EQ(bfloat16(away).bits, static_cast<uint16_t>(even + 1)) << "above the tie of " << x;
    EXPECT_EQ(bfloat16(toward).bits, even) << "below the tie of " << x;
  }
}

TEST(BFloat16, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bfloat16(inf).bits, 0x7f80);
  EXPECT_EQ(bfloat16(-inf).bits, 0xff80);
  EXPECT_EQ(bfloat16(0.0f).bits, 0x0000);
  EXPECT_EQ(bfloat16(-0.0).bits, 0x8000);
  EXPECT_EQ(bfloat16(1.0).bits, 0x3f80);
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::max()).bits, 0x7f80);  // past the largest bfloat16
  EXPECT_EQ(bfloat16(1e300).bits, 0x7f80);
  EXPECT_EQ(bfloat16(-1e300).bits, 0xff80);
  EXPECT_EQ(bfloat16(1e-300).bits, 0x0000);
  EXPECT_EQ(bfloat16(3.3895313892515355e38).bits, 0x7f7f);  // the largest finite bfloat16
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::denorm_min()).bits, 0x0000);
  EXPECT_EQ(bfloat16(float_of_bits(0x00010000u)).bits, 0x0001);  // bfloat16's smallest subnormal
  const bfloat16 nan(std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(std::isnan(static_cast<float>(nan)));
  EXPECT_TRUE(is_nan_bits(bfloat16(float_of_bits(0x7f800001u)).bits));  // a signalling NaN's payload
  EXPECT_EQ(bfloat16(int64_t{257}).bits, bfloat16(256.0).bits);          // 257 ties between 256 and 258
  EXPECT_EQ(bfloat16(true).bits, 0x3f80);
}

// ---- tensors -----------------------------------------------------------------------------------

Tensor rounded_reference(const Tensor& x) {  // x's values rounded by the oracle, as float64
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v) e = std::isnan(e) ? e : bf16_value(nearest_even(e));
  return from_vector(v, x.shape());
}

TEST(BFloat16Tensor, ConvertsBothWaysAndCarriesGradients) {
  Generator gen(std::random_device{}());
  const Tensor x = (randn({7, 13}, kFloat64, &gen) * 100.0).requires_grad_();
  const Tensor h = to(x, kBFloat16);
  EXPECT_EQ(h.dtype(), kBFloat16);
  EXPECT_EQ(h.describe().find("bfloat16") != std::string::npos, true);
  EXPECT_TRUE(all_close(to(h, kFloat64), rounded_reference(x), 0, 0));
  // From float32 too (x rounded to float32 first: its own rounding, which may differ from x's
  // direct one at the rare float32 that lands on a bfloat16 tie, so it gets its own oracle).
  const Tensor x32 = to(x, kFloat32);
  EXPECT_TRUE(all_close(to(to(x32, kBFloat16), kFloat64), rounded_reference(x32), 0, 0));
  // The gradient of to() is the identity, converted back to the input's dtype: here the float32
  // w, rounded to bfloat16 on the way through h, then widened to float64 (exact).
  const Tensor w = randn({7, 13}, kFloat32, &gen);
  const auto g = grad(sum(to(h, kFloat32) * w), {x});
  EXPECT_EQ(g[0].dtype(), kFloat64);
  EXPECT_TRUE(all_close(g[0], rounded_reference(w), 0, 0));
}

TEST(BFloat16Tensor, FillComparisonsWhereAndIndexing) {
  Generator gen(std::random_device{}());
  const Tensor a = to(randn({5, 9}, kFloat32, &gen), kBFloat16), b = to(randn({5, 9}, kFloat32, &gen), kBFloat16);
  const Tensor wide_a = to(a, kFloat32), wide_b = to(b, kFloat32);
  EXPECT_TRUE(all_close(to(lt(a, b), kFloat32), to(lt(wide_a, wide_b), kFloat32), 0, 0));
  EXPECT_TRUE(all_close(to(ge(a, b), kFloat32), to(ge(wide_a, wide_b), kFloat32), 0, 0));
  const Tensor picked = where(gt(wide_a, wide_b), a, b);
  EXPECT_EQ(picked.dtype(), kBFloat16);
  EXPECT_TRUE(all_close(to(picked, kFloat32), where(gt(wide_a, wide_b), wide_a, wide_b), 0, 0));
  EXPECT_EQ(full({3}, 0.1, kBFloat16).to_vector<double>()[1], bf16_value(nearest_even(0.1L)));
  const Tensor index = from_vector(std::vector<int64_t>{4, 0, 2, 2}, {4});
  EXPECT_TRUE(all_close(to(index_select(a, 0, index), kFloat32), index_select(wide_a, 0, index), 0, 0));
  const Tensor cols = from_vector(std::vector<int64_t>{8, 0, 3, 3, 1}, {5, 1});
  EXPECT_TRUE(all_close(to(gather(a, 1, cols), kFloat32), gather(wide_a, 1, cols), 0, 0));
  EXPECT_TRUE(all_close(to(contiguous(transpose(a, 0, 1)), kFloat32), contiguous(transpose(wide_a, 0, 1)), 0, 0));
}

TEST(BFloat16Tensor, ReductionsComputeInFloat32AndRoundOnce) {
  Generator gen(std::random_device{}());
  const Tensor a = to(randn({6, 257}, kFloat32, &gen), kBFloat16), wide = to(a, kFloat32);
  EXPECT_TRUE(all_close(sum(a, {1}), to(sum(wide, {1}), kBFloat16), 0, 0));
  EXPECT_TRUE(all_close(sum(a), to(sum(wide), kBFloat16), 0, 0));
  EXPECT_TRUE(all_close(amax(a, {0}), to(amax(wide, {0}), kBFloat16), 0, 0));
  EXPECT_TRUE(all_close(argmax(a, 1), argmax(wide, 1), 0, 0));
  EXPECT_EQ(sum(a).dtype(), kBFloat16);
}

TEST(BFloat16Tensor, MatmulWithinTheDerivedBound) {
  Generator gen(std::random_device{}());
  for (const auto& [m, k, n] : {std::array<int64_t, 3>{1, 1, 1}, {17, 100, 33}, {64, 513, 9}}) {
    const Tensor a = to(randn({3, m, k}, kFloat32, &gen), kBFloat16), b = to(randn({k, n}, kFloat32, &gen), kBFloat16);
    const Tensor c = matmul(a, b);
    EXPECT_EQ(c.dtype(), kBFloat16);
    EXPECT_TRUE(within_bf16_matmul_bound(c, a, b));
    // A stored transpose reads in place, as in float32.
    const Tensor bt = to(randn({n, k}, kFloat32, &gen), kBFloat16);
    EXPECT_TRUE(within_bf16_matmul_bound(matmul(a, transpose(bt, 0, 1)), a, transpose(bt, 0, 1)));
  }
  // The bound is tight enough to catch a wrong last rounding: truncating the float32 results
  // (up to twice the error of rounding to nearest) breaks it.
  const Tensor a = to(randn({16, 64}, kFloat32, &gen), kBFloat16), b = to(randn({64, 16}, kFloat32, &gen), kBFloat16);
  std::vector<float> truncated = matmul(to(a, kFloat32), to(b, kFloat32)).to_vector<float>();
  for (float& v : truncated) v = float_of_bits(bits_of_float(v) & 0xffff0000u);
  EXPECT_FALSE(within_bf16_matmul_bound(to(from_vector(truncated, {16, 16}), kBFloat16), a, b));
}

TEST(BFloat16Tensor, PrintsItsValuesAndDtype) {
  std::ostringstream os;
  os << to(from_vector(std::vector<double>{1.0, 0.1, -3.0}, {3}), kBFloat16);
  EXPECT_NE(os.str().find("dtype=bfloat16"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("0.1001"), std::string::npos) << os.str();  // 0.1 rounds to 0.10009765625
}

// The elementwise math on bfloat16 computes each element in float32 with the float32 kernel's
// formula and rounds once, so its result is exactly the float32 op's on the widened inputs,
// rounded: every unary op on its domain, the activations' fused gradients, and the binary ops
// with a broadcast operand and with a scalar, on contiguous tensors of whole and partial 16-byte
// packs and on strided views.
TEST(BFloat16Tensor, ElementwiseMathComputesInFloat32AndRoundsOnce) {
  Generator gen(std::random_device{}());
  const Tensor normal = to(randn({7, 33}, kFloat32, &gen) * 2.0, kBFloat16);
  const Tensor positive = to(uniform({7, 33}, 0.05, 4.0, kFloat32, &gen), kBFloat16);
  auto rounded = [](const Tensor& wide) { return to(wide, kBFloat16); };
  auto views = [](const Tensor& t) { return std::vector<Tensor>{t, transpose(t, 0, 1), narrow(t, 1, 3, 17)}; };
  for (const UnaryCase& c : bf16_unary_cases())
    for (const Tensor& x : views(c.positive ? positive : normal)) {
      const Tensor got = c.f(x);
      EXPECT_EQ(got.dtype(), kBFloat16) << c.name;
      EXPECT_TRUE(all_close(got, rounded(c.f(to(x, kFloat32))), 0, 0)) << c.name << " " << x.describe();
    }
  // The activations whose backward is one fused kernel, dy * f'(x): that kernel's float32 value
  // rounded once.
  const Tensor dy = to(randn({7, 33}, kFloat32, &gen), kBFloat16);
  const std::vector<UnaryCase> cases = bf16_unary_cases();
  for (const char* name : {"relu", "elu", "gelu", "gelu_tanh"}) {
    const auto& c = *std::find_if(cases.begin(), cases.end(), [&](const UnaryCase& u) { return std::string(u.name) == name; });
    const Tensor x = clone(normal).requires_grad_(), wide = to(normal, kFloat32).requires_grad_();
    const Tensor g = grad(c.f(x), {x}, dy)[0];
    EXPECT_EQ(g.dtype(), kBFloat16) << name;
    EXPECT_TRUE(all_close(g, rounded(grad(c.f(wide), {wide}, to(dy, kFloat32))[0]), 0, 0)) << name << " gradient";
  }
  const Tensor row = to(randn({33}, kFloat32, &gen), kBFloat16);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&, const Tensor&)>>> binary = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }},  // of the positive tensor
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }}};
  for (const auto& [name, f] : binary) {
    const Tensor& a = std::string(name) == "pow" ? positive : normal;
    for (const Tensor& b : {positive, row}) {
      const Tensor got = f(a, b);
      EXPECT_EQ(got.dtype(), kBFloat16) << name;
      EXPECT_TRUE(all_close(got, rounded(f(to(a, kFloat32), to(b, kFloat32))), 0, 0)) << name << " " << b.describe();
    }
  }
  // A scalar joins as a 0-dim bfloat16 (exact here: 0.75 and 3 are bfloat16 values).
  const Tensor scaled = rounded(to(normal, kFloat32) * 0.75);
  EXPECT_TRUE(all_close(normal * 0.75 + 3.0, rounded(to(scaled, kFloat32) + 3.0), 0, 0));
}

// Softmax and log-softmax on bfloat16 compute as the float32 kernel does on the widened input and
// round once, so the forward is the float32 result rounded (log-softmax's double, rounded straight
// to bfloat16, may differ by one unit from its float32 rounded again); the backward, from the
// rounded y, within bf16_softmax_gradient_bound of the exact gradient. Along the last dim and
// along a leading one.
TEST(BFloat16Tensor, SoftmaxComputesInFloat32AndRoundsOnce) {
  Generator gen(std::random_device{}());
  const Tensor x = to(randn({6, 37}, kFloat32, &gen) * 3.0, kBFloat16);
  const Tensor dy = to(randn({6, 37}, kFloat32, &gen), kBFloat16);
  const double unit = std::ldexp(1.0, -7);
  for (const int64_t dim : {-1, 0})
    for (const bool log : {false, true}) {
      auto f = [&](const Tensor& t) { return log ? log_softmax(t, dim) : softmax(t, dim); };
      const std::string what = std::string(log ? "log_softmax" : "softmax") + " dim " + std::to_string(dim);
      const Tensor y = f(x);
      EXPECT_EQ(y.dtype(), kBFloat16) << what;
      EXPECT_TRUE(all_close(y, to(f(to(x, kFloat32)), kBFloat16), log ? unit : 0, 0)) << what;
      const Tensor leaf = clone(x).requires_grad_(), exact = to(x, kFloat64).requires_grad_();
      const Tensor g = grad(f(leaf), {leaf}, dy)[0], g64 = grad(f(exact), {exact}, to(dy, kFloat64))[0];
      EXPECT_EQ(g.dtype(), kBFloat16) << what;
      EXPECT_TRUE(within_bound(g, g64, bf16_softmax_gradient_bound(x, dy, dim, log))) << what << " gradient";
    }
}

// Cross-entropy on bfloat16 logits computes as the float32 kernel does on the widened logits: the
// loss (float32) is exactly float32's, every reduction; the logits' gradient is float32's rounded
// once. Rows with ignored targets among them.
TEST(BFloat16Tensor, CrossEntropyComputesInFloat32) {
  Generator gen(std::random_device{}());
  const Tensor x = to(randn({37, 203}, kFloat32, &gen) * 3.0, kBFloat16), wide = to(x, kFloat32);
  std::vector<int64_t> targets = randint(0, 203, {37}, kCPU, &gen).to_vector<int64_t>();
  for (size_t i = 3; i < targets.size(); i += 7) targets[i] = -100;
  const Tensor t = from_vector(targets, {37});
  for (const Reduction reduction : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
    const Tensor loss = cross_entropy(x, t, -100, reduction);
    EXPECT_EQ(loss.dtype(), kFloat32);
    EXPECT_TRUE(all_close(loss, cross_entropy(wide, t, -100, reduction), 0, 0));
    const Tensor leaf = clone(x).requires_grad_(), wide_leaf = clone(wide).requires_grad_();
    const Tensor dloss = reduction == Reduction::None ? randn({37}, kFloat32, &gen) : Tensor();
    const Tensor g = dloss.defined() ? grad(cross_entropy(leaf, t, -100, reduction), {leaf}, dloss)[0]
                                     : grad(cross_entropy(leaf, t, -100, reduction), {leaf})[0];
    const Tensor g32 = dloss.defined() ? grad(cross_entropy(wide_leaf, t, -100, reduction), {wide_leaf}, dloss)[0]
                                       : grad(cross_entropy(wide_leaf, t, -100, reduction), {wide_leaf})[0];
    EXPECT_EQ(g.dtype(), kBFloat16);
    EXPECT_TRUE(all_close(g, to(g32, kBFloat16), 0, 0));
  }
}

// Causal attention on bfloat16 runs the float32 kernel on the widened inputs and rounds once: the
// output is float32's rounded and lse (float32) is float32's; the backward, from the rounded
// output, is the float32 backward's given that output, rounded. Grouped heads, fewer queries than
// keys, with and without a window; and through the op, the gradients arrive in bfloat16.
TEST(BFloat16Tensor, AttentionComputesInFloat32AndRoundsOnce) {
  Generator gen(std::random_device{}());
  const Tensor q = to(randn({2, 4, 19, 16}, kFloat32, &gen), kBFloat16);
  const Tensor k = to(randn({2, 2, 23, 16}, kFloat32, &gen), kBFloat16);
  const Tensor v = to(randn({2, 2, 23, 16}, kFloat32, &gen), kBFloat16);
  const Tensor dout = to(randn({2, 4, 19, 16}, kFloat32, &gen), kBFloat16);
  const Backend& cpu = backend_for(q);
  const double scale = 0.25;
  auto wide = [](const Tensor& t) { return to(t, kFloat32); };
  for (const int64_t window : {0, 7}) {
    const Tensor out = empty(q.shape(), kBFloat16), lse = empty({2, 4, 19}, kFloat32);
    const Tensor out32 = empty(q.shape(), kFloat32), lse32 = empty({2, 4, 19}, kFloat32);
    cpu.attention(q, k, v, scale, window, out, lse);
    cpu.attention(wide(q), wide(k), wide(v), scale, window, out32, lse32);
    EXPECT_TRUE(all_close(out, to(out32, kBFloat16), 0, 0)) << "window " << window;
    EXPECT_TRUE(all_close(lse, lse32, 0, 0)) << "window " << window;
    std::vector<Tensor> g, g32;
    for (const Tensor& t : {q, k, v}) {
      g.push_back(empty(t.shape(), kBFloat16));
      g32.push_back(empty(t.shape(), kFloat32));
    }
    cpu.attention_backward(q, k, v, out, lse, dout, scale, window, g[0], g[1], g[2]);
    cpu.attention_backward(wide(q), wide(k), wide(v), wide(out), lse, wide(dout), scale, window, g32[0], g32[1],
                           g32[2]);
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(all_close(g[i], to(g32[i], kBFloat16), 0, 0)) << "window " << window << " input " << i;
  }
  const Tensor lq = clone(q).requires_grad_(), lk = clone(k).requires_grad_(), lv = clone(v).requires_grad_();
  const Tensor y = scaled_dot_product_attention(lq, lk, lv, 5);
  EXPECT_EQ(y.dtype(), kBFloat16);
  for (const Tensor& gi : grad(y, {lq, lk, lv}, dout)) EXPECT_EQ(gi.dtype(), kBFloat16);
}

// The rotary embedding on bfloat16 rotates each pair in float32 with float32 tables and rounds
// once: exactly float32's rotation of the widened rows, rounded, forward and backward (the inverse
// rotation), with the dims past the rotated ones copied; bfloat16 tables are widened first.
TEST(BFloat16Tensor, RotaryComputesInFloat32AndRoundsOnce) {
  Generator gen(std::random_device{}());
  const Tensor x = to(randn({2, 3, 9, 10}, kFloat32, &gen), kBFloat16);
  const Tensor dy = to(randn({2, 3, 9, 10}, kFloat32, &gen), kBFloat16);
  const Tensor angles = uniform({9, 4}, -3.0, 3.0, kFloat32, &gen);
  const Tensor c = cos(angles), s = sin(angles);
  const Tensor leaf = clone(x).requires_grad_(), wide = to(x, kFloat32).requires_grad_();
  const Tensor y = rotary_embedding(leaf, c, s), y32 = rotary_embedding(wide, c, s);
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_TRUE(all_close(y, to(y32, kBFloat16), 0, 0));
  const Tensor g = grad(y, {leaf}, dy)[0];
  EXPECT_EQ(g.dtype(), kBFloat16);
  EXPECT_TRUE(all_close(g, to(grad(y32, {wide}, to(dy, kFloat32))[0], kBFloat16), 0, 0));
  const Tensor cb = to(c, kBFloat16), sb = to(s, kBFloat16);
  const Tensor widened_tables = rotary_embedding(to(x, kFloat32), to(cb, kFloat32), to(sb, kFloat32));
  EXPECT_TRUE(all_close(rotary_embedding(x, cb, sb), to(widened_tables, kBFloat16), 0, 0));
}

TEST(BFloat16Tensor, KernelsWithoutItSayWhatToDo) {
  const Tensor a = to(randn({2, 4}, kFloat32), kBFloat16);
  EXPECT_LINEA_ERROR(cumsum(a, 1), "bfloat16", "float32");
}

}  // namespace
}  // namespace linea::testing
