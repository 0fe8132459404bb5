// StackedProjection: several Linear layers of one input as one product. Under grad mode (training)
// its results and every gradient must equal those of the layers run one by one; without grad (the
// cached concatenation) its results must.
#include "autograd/grad_mode.h"
#include "nn/layers/stacked_projection.h"
#include "tests/test_util.h"

namespace linea::nn {
namespace {

using testing::all_close;

struct Layers {
  Generator gen{11};
  // Widths 3, 5 and 2 (not a multiple of anything); a has a bias that is added, b one that the
  // caller adds itself (with_bias false), c none.
  Linear a{6, 3, gen}, b{6, 5, gen}, c{6, 2, gen, {.bias = false}};
  Layers() {
    for (Linear* l : {&a, &b, &c}) l->to(kFloat64);
  }
  std::vector<StackedProjection::Part> parts() const { return {{&a, true}, {&b, false}, {&c, true}}; }
  std::vector<Tensor> one_by_one(const Tensor& x) const {
    return {a.forward(x), b.forward_without_bias(x), c.forward(x)};
  }
  std::vector<Tensor> params() const { return {a.weight, a.bias, b.weight, c.weight}; }
};

// sum_i <out_i, weights_i> over the parts listed in `used`.
Tensor weighted_sum(const std::vector<Tensor>& outs, const std::vector<Tensor>& weights,
                    const std::vector<size_t>& used) {
  Tensor total;
  for (size_t i : used) {
    const Tensor term = sum(outs[i] * weights[i]);
    total = total.defined() ? total + term : term;
  }
  return total;
}

void expect_same_gradients(const std::vector<size_t>& used) {
  Layers layers;
  Generator gen(5);
  const Tensor x = randn({2, 4, 6}, kFloat64, &gen).requires_grad_();
  const std::vector<Tensor> weights = {randn({2, 4, 3}, kFloat64, &gen), randn({2, 4, 5}, kFloat64, &gen),
                                       randn({2, 4, 2}, kFloat64, &gen)};
  StackedProjection stack;
  const std::vector<Tensor> stacked = stack.forward(layers.parts(), x);
  const std::vector<Tensor> alone = layers.one_by_one(x);
  ASSERT_EQ(stacked.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all_close(stacked[i], alone[i], 1e-13, 1e-13)) << "part " << i;

  std::vector<Tensor> wrt = layers.params();
  wrt.push_back(x);
  const std::vector<Tensor> g_stacked = grad(weighted_sum(stacked, weights, used), wrt, Tensor(), false, true);
  const std::vector<Tensor> g_alone = grad(weighted_sum(alone, weights, used), wrt, Tensor(), false, true);
  for (size_t i = 0; i < wrt.size(); ++i) {
    // A weight whose part no gradient reached: zeros through the stack, none one by one.
    const Tensor want = g_alone[i].defined() ? g_alone[i] : zeros_like(wrt[i]);
    ASSERT_TRUE(g_stacked[i].defined()) << "input " << i;
    EXPECT_TRUE(all_close(g_stacked[i], want, 1e-12, 1e-12)) << "input " << i;
  }
}

TEST(StackedProjection, UnderGradMatchesTheLayersOneByOne) { expect_same_gradients({0, 1, 2}); }

TEST(StackedProjection, PartsWithoutGradientGetZeros) { expect_same_gradients({2, 0}); }

TEST(StackedProjection, WithoutGradMatchesTheLayersAndSeesNewWeights) {
  Layers layers;
  Generator gen(6);
  const Tensor x = randn({3, 6}, kFloat64, &gen);
  NoGradGuard no_grad;
  StackedProjection stack;
  for (int round = 0; round < 2; ++round) {
    const std::vector<Tensor> stacked = stack.forward(layers.parts(), x), alone = layers.one_by_one(x);
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all_close(stacked[i], alone[i], 1e-13, 1e-13)) << "part " << i;
    mul_(layers.b.weight, 1.5);  // written in place: the cache must be rebuilt
  }
}

TEST(StackedProjection, APartWithLoraRunsOneByOne) {
  Layers layers;
  layers.b.add_lora(2, 4.0, layers.gen);
  {
    NoGradGuard no_grad;
    fill_(layers.b.lora->B, 0.25);  // B starts at zero; make the update show
  }
  Generator gen(7);
  const Tensor x = randn({2, 6}, kFloat64, &gen).requires_grad_();
  StackedProjection stack;
  const std::vector<Tensor> stacked = stack.forward(layers.parts(), x), alone = layers.one_by_one(x);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all_close(stacked[i], alone[i], 1e-13, 1e-13)) << "part " << i;
}

TEST(StackedProjection, PartsMustShareTheInputWidth) {
  Layers layers;
  Linear other(4, 3, layers.gen);
  other.to(kFloat64);
  StackedProjection stack;
  EXPECT_LINEA_ERROR(stack.forward({{&layers.a, true}, {&other, true}}, randn({2, 6}, kFloat64)), "StackedProjection",
                     "one input width");
}

}  // namespace
}  // namespace linea::nn
