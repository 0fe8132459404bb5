// WQKV attention pooling (nn/pooling/wqkv.h): the forward equals a direct quadratic reference of
// the paper's formulas; decoding equals forward in float64 and float32, values and gradients, at
// lengths that are and are not multiples of the chunk; huge pooling weights stay finite;
// causality; the fixed-size state; errors.
#include "nn/pooling/wqkv.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "tests/nn/mixer_forms.h"

namespace linea::nn {
namespace {

using testing::compare_forms;
using testing::FormDiff;
using testing::relative_diff;

constexpr int64_t kD = 12;

WqkvConfig small_config(int64_t heads = 1, WqkvScale scale = WqkvScale::InvSqrtDim) {
  WqkvConfig c;
  c.d_model = kD;
  c.heads = heads;
  c.head_dim = 4;
  c.slots = 5;
  c.scale = scale;
  c.scan = {8, 4};
  return c;
}

std::shared_ptr<WqkvPooling> build(const WqkvConfig& c, DType dtype, uint64_t seed = 3) {
  Generator gen(seed);
  auto layer = std::make_shared<WqkvPooling>(c, gen);
  layer->to(dtype);
  return layer;
}

// Scales W_w so that the pooling weights w reach the hundreds.
void scale_pooling_weights(WqkvPooling& layer, double factor) {
  NoGradGuard no_grad;
  mul_(layer.w_proj->weight, factor);
}

// The paper's formulas, literally: for every l and slot j, softmax over i <= l of w_ij pools the
// keys and values (a T x T x S tensor), then q_l attends to the S pooled keys.
Tensor reference(WqkvPooling& layer, const Tensor& x) {
  const WqkvConfig& c = layer.config();
  const int64_t B = x.size(0), T = x.size(1), H = c.heads, C = c.head_dim, S = c.slots;
  auto heads = [&](const Linear& proj, int64_t n) {
    return permute(reshape(proj.forward(x), {B, T, H, n}), {0, 2, 1, 3});  // (B, H, T, n)
  };
  const double scale = c.scale == WqkvScale::InvSqrtDim ? 1.0 / std::sqrt(static_cast<double>(C)) : 1.0;
  const Tensor q = heads(*layer.q_proj, C) * scale, k = heads(*layer.k_proj, C), v = heads(*layer.v_proj, C);
  const Tensor w = heads(*layer.w_proj, S);
  // later[l, i] = i > l: those positions are not pooled for query l.
  std::vector<bool> later(static_cast<size_t>(T * T));
  for (int64_t l = 0; l < T; ++l)
    for (int64_t i = 0; i < T; ++i) later[static_cast<size_t>(l * T + i)] = i > l;
  const Tensor mask = reshape(from_vector(later, {T, T}), {1, 1, 1, T, T});
  // (B, H, S, l, i): slot j's weights over positions i for query position l.
  const Tensor logits = expand(unsqueeze(permute(w, {0, 1, 3, 2}), 3), {B, H, S, T, T});
  const Tensor pool = softmax(masked_fill(logits, mask, -std::numeric_limits<double>::infinity()), -1);
  const Tensor keys = matmul(pool, unsqueeze(k, 2)), values = matmul(pool, unsqueeze(v, 2));  // (B, H, S, T, C)
  const Tensor scores = sum(keys * unsqueeze(q, 2), {-1});                                   // (B, H, S, T)
  const Tensor p = softmax(scores, 2);
  const Tensor o = sum(unsqueeze(p, -1) * values, {2});  // (B, H, T, C)
  return layer.out_proj->forward(reshape(permute(o, {0, 2, 1, 3}), {B, T, H * C}));
}

TEST(Wqkv, ForwardMatchesTheSeedsFormulas) {
  for (const int64_t heads : {1, 2})
    for (const double w_scale : {1.0, 300.0}) {
      auto layer = build(small_config(heads, heads == 1 ? WqkvScale::InvSqrtDim : WqkvScale::None), kFloat64);
      scale_pooling_weights(*layer, w_scale);
      Generator gen(8);
      const Tensor x = randn({2, 19, kD}, kFloat64, &gen);
      EXPECT_LE(relative_diff(layer->forward(x), reference(*layer, x)), 1e-12)
          << "heads " << heads << " w scale " << w_scale;
    }
}

TEST(Wqkv, RecurrentFormEqualsParallelForm) {
  for (const int64_t heads : {1, 2})
    for (const DType dtype : {kFloat64, kFloat32}) {
      FormDiff worst;
      for (const int64_t T : {16, 13, 8, 1}) {
        auto layer = build(small_config(heads), dtype);
        Generator gen(30 + static_cast<uint64_t>(T));
        const FormDiff d = compare_forms(*layer, randn({2, T, kD}, dtype, &gen));
        testing::expect_forms_agree(d, dtype, "heads=" + std::to_string(heads) + " T=" + std::to_string(T));
        worst.merge(d);
      }
      testing::print_forms("Wqkv heads=" + std::to_string(heads), dtype, worst);
    }
}

// Pooling weights in the thousands: e^w overflows float64 past 709 and float32 past 88, so only
// the running-max form survives. Offsets of +-1000 and +-3000 on w (its bias) leave the pooling
// softmax as spread as before: values and gradients agree as everywhere else.
TEST(Wqkv, LargePoolingWeightsStayFinite) {
  for (const double offset : {1000.0, 3000.0})
    for (const DType dtype : {kFloat64, kFloat32}) {
      WqkvConfig c = small_config(2);
      c.bias = true;
      auto layer = build(c, dtype);
      {
        NoGradGuard no_grad;
        const Tensor signs = to(from_vector<double>({1, -1, 1, -1, 1, 1, -1, 1, -1, 1}, {10}), dtype);
        copy_(layer->w_proj->bias, signs * offset);
      }
      Generator gen(9);
      const FormDiff d = compare_forms(*layer, randn({2, 13, kD}, dtype, &gen));
      const std::string what = "w offset " + std::to_string(static_cast<int>(offset));
      testing::expect_forms_agree(d, dtype, what);
      testing::print_forms("Wqkv " + what, dtype, d);
    }
}

// W_w scaled by 3000, so w differs by hundreds between tokens: each slot's pooling is one-hot,
// K'_l = k at the slot's running argmax, and d/dw is zero up to e^-(hundreds), which leaves only
// rounding noise of the cancelling terms dK'/dw_t = p_t (k_t - K'). Values and gradients stay
// finite; values agree to rounding; in float64 so do gradients. In float32 the gradients carry
// that noise times |W_w| (w itself is only known to 3000 |W_w x| 6e-8 ~ 1e-4): they agree to 1e-3.
TEST(Wqkv, SharpPoolingStaysFinite) {
  for (const DType dtype : {kFloat64, kFloat32}) {
    auto layer = build(small_config(2), dtype);
    scale_pooling_weights(*layer, 3000.0);
    Generator gen(9);
    const FormDiff d = compare_forms(*layer, randn({2, 13, kD}, dtype, &gen));
    EXPECT_TRUE(d.finite);
    EXPECT_LE(d.output, testing::tolerance(dtype));
    EXPECT_LE(d.gradient, dtype == kFloat64 ? testing::tolerance(dtype) : 1e-3) << d.worst;
    testing::print_forms("Wqkv w scale 3000 (one-hot pooling)", dtype, d);
  }
}

// The parallel form holds nothing of T x T (nor the T x S x C of every K'_l): the largest tensor
// in its graph is the scans' diagonal sub-blocks, B H T L max(S, C) for sub-blocks of L.
TEST(Wqkv, LongSequenceStaysLinearInMemory) {
  const int64_t B = 2, T = 2048, L = 16;
  WqkvConfig c = small_config(2);
  c.scan = {64, L};
  auto layer = build(c, kFloat32);
  Generator gen(12);
  const Tensor x = randn({B, T, kD}, kFloat32, &gen).requires_grad_();
  const Tensor y = layer->forward(x);
  const int64_t largest = testing::largest_tensor_in_graph({y});
  EXPECT_LE(largest, B * c.heads * T * L * std::max(c.slots, c.head_dim));
  std::printf("[ wqkv ] T=%lld: largest tensor in the graph %lld elements (T x T = %lld)\n",
              static_cast<long long>(T), static_cast<long long>(largest), static_cast<long long>(T * T));
  backward(sum(y * y));
  EXPECT_TRUE(testing::all_finite(x.grad()));
}

TEST(Wqkv, IsCausal) {
  auto layer = build(small_config(2), kFloat64);
  Generator gen(4);
  const Tensor x = randn({2, 21, kD}, kFloat64, &gen);
  for (const int64_t t : {0, 3, 7, 8, 12, 19}) EXPECT_LE(testing::causality_violation(*layer, x, t, gen), 1e-13) << t;
}

TEST(Wqkv, StateSizeDoesNotDependOnLength) {
  auto layer = build(small_config(2), kFloat64);
  Generator gen(2);
  auto state = layer->init_state(3);
  auto& s = dynamic_cast<WqkvState&>(*state);
  const Shape sums{3, 2, 5, 4}, per_slot{3, 2, 5};
  for (int64_t t = 0; t < 40; ++t) {
    layer->step(randn({3, kD}, kFloat64, &gen), *state);
    EXPECT_EQ(s.keys.shape(), sums) << "after " << t + 1 << " tokens";
    EXPECT_EQ(s.values.shape(), sums);
    EXPECT_EQ(s.normalizer.shape(), per_slot);
    EXPECT_EQ(s.max.shape(), per_slot);
  }
  EXPECT_EQ(s.position, 40);
}

TEST(Wqkv, EmptySequence) {
  auto layer = build(small_config(), kFloat64);
  EXPECT_EQ(layer->forward(zeros({2, 0, kD}, kFloat64)).shape(), (Shape{2, 0, kD}));
}

TEST(Wqkv, BadConfigAndInputsAreErrors) {
  Generator gen(1);
  EXPECT_LINEA_ERROR(WqkvPooling({.d_model = 10, .heads = 4}, gen), "WqkvPooling", "divisible");
  EXPECT_LINEA_ERROR(WqkvPooling({.d_model = 8, .slots = 0}, gen), "WqkvPooling", "slots");
  EXPECT_LINEA_ERROR(parse_wqkv_scale("sqrt"), "WqkvPooling", "sqrt");
  WqkvConfig bad_chunk = small_config();
  bad_chunk.scan = {12, 8};
  EXPECT_LINEA_ERROR(WqkvPooling(bad_chunk, gen), "WqkvPooling", "chunk_size 12");
  WqkvPooling layer(small_config(), gen);
  EXPECT_LINEA_ERROR(layer.forward(randn({2, 3, 7})), "WqkvPooling", "float32[2, 3, 7]");
  EXPECT_LINEA_ERROR(layer.step(randn({2, 3, kD}), *layer.init_state(2)), "WqkvPooling", "step");
  auto state = layer.init_state(3);
  EXPECT_LINEA_ERROR(layer.step(randn({2, kD}), *state), "WqkvPooling", "batch 3");
}

}  // namespace
}  // namespace linea::nn
