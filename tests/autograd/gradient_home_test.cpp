// Gradient homes (autograd/node.h: GradientHome): split's pieces offer their place in the buffer
// the split's backward assembles, views of them pass it on, and the ops that claim it (the refined
// gate, normalized_exp, the scan) write the gradient there. The gradients must not change, also
// when a piece has two consumers (only the first claim gets the memory) or the graph is retained.
#include "autograd/node.h"
#include "tests/test_util.h"

namespace linea {
namespace {

using testing::all_close;

// A linear attention layer's split: (B, T, 5 H d) into five (B, T, H d) parts, each seen as
// (B, H, T, d), with q and k through normalized_exp and the gate parts through refined_log_gate.
struct Stack {
  static constexpr int64_t B = 2, T = 5, H = 2, d = 3;
  static Tensor heads_first(const Tensor& y) { return permute(view(y, {B, T, H, d}), {0, 2, 1, 3}); }
  // The loss over the parts, each weighted by a fixed random tensor.
  static Tensor loss(const std::vector<Tensor>& parts, const std::vector<Tensor>& weights, const Tensor& bias) {
    const Tensor q = normalized_exp(heads_first(parts[0]), NormalizedExpMode::RowMax, 0.5).features;
    const NormalizedExp keys = normalized_exp(heads_first(parts[1]), NormalizedExpMode::PrefixMax);
    const Tensor gate = refined_log_gate(heads_first(parts[3]), heads_first(parts[4]), -20.0, bias, bias * 2.0);
    return sum(q * weights[0]) + sum(keys.features * weights[1]) + sum(keys.max) +
           sum(heads_first(parts[2]) * weights[2]) + sum(gate * weights[3]);
  }
};

std::vector<Tensor> weights() {
  std::vector<Tensor> w;
  for (int i = 0; i < 4; ++i) w.push_back(randn({Stack::B, Stack::H, Stack::T, Stack::d}, kFloat64));
  return w;
}

// The mechanism itself: a piece's home is its place in the split's buffer, a view passes it on
// seen through the view, one claim per piece, and none for a tensor split did not make.
TEST(GradientHome, APieceIsClaimedOnceAtItsPlace) {
  const Tensor x = randn({2, 3, 8}, kFloat64).requires_grad_();
  const std::vector<Tensor> parts = split(x, {3, 5}, -1);
  const Tensor seen = permute(view(parts[1], {2, 3, 5, 1}), {0, 2, 1, 3});
  const Tensor memory = autograd::claim(autograd::gradient_home(seen));
  ASSERT_TRUE(memory.defined());
  EXPECT_EQ(memory.shape(), seen.shape());
  EXPECT_EQ(memory.strides(), seen.strides());  // the buffer has x's layout, as parts[1] does
  EXPECT_FALSE(autograd::claim(autograd::gradient_home(parts[1])).defined());  // claimed through the view
  const Tensor other = autograd::claim(autograd::gradient_home(parts[0]));
  ASSERT_TRUE(other.defined());
  EXPECT_EQ(other.storage().get(), memory.storage().get());  // one buffer for the whole gradient
  EXPECT_EQ(memory.offset() - other.offset(), 3);            // parts[1] starts 3 columns after parts[0]
  EXPECT_TRUE(autograd::gradient_home(x) == nullptr);
  EXPECT_TRUE(autograd::gradient_home(parts[0] * 2.0) == nullptr);  // not a view
  NoGradGuard no_grad;
  EXPECT_TRUE(autograd::gradient_home(split(detach(x), 4, -1)[0]) == nullptr);  // nothing recorded
}

TEST(GradientHome, SplitPiecesGetTheGradientsOfSeparateTensors) {
  const int64_t width = Stack::H * Stack::d;
  const Tensor x = randn({Stack::B, Stack::T, 5 * width}, kFloat64).requires_grad_();
  const Tensor bias = randn({Stack::H, 1, Stack::d}, kFloat64).requires_grad_();
  const std::vector<Tensor> w = weights();
  // Through split: the gradients written into their places.
  const std::vector<Tensor> parts = split(x, width, -1);
  EXPECT_TRUE(autograd::gradient_home(parts[0]) != nullptr);
  EXPECT_TRUE(autograd::gradient_home(Stack::heads_first(parts[0])) != nullptr);
  backward(Stack::loss(parts, w, bias));
  // The reference: five separate leaves, the same values.
  std::vector<Tensor> separate;
  {
    NoGradGuard no_grad;
    for (const Tensor& p : split(x, width, -1)) separate.push_back(contiguous(p));
  }
  for (Tensor& s : separate) s.requires_grad_();
  const Tensor bias2 = detach(bias).requires_grad_();
  backward(Stack::loss(separate, w, bias2));
  EXPECT_TRUE(all_close(x.grad(), cat({separate[0].grad(), separate[1].grad(), separate[2].grad(), separate[3].grad(),
                                       separate[4].grad()},
                                      -1),
                        0, 0));
  EXPECT_TRUE(all_close(bias.grad(), bias2.grad(), 0, 0));
}

// A piece with two consumers that both claim: the second allocates, the engine adds the two, and
// split copies the sum into place.
TEST(GradientHome, ASecondClaimGetsNothingAndTheSumIsKept) {
  const Tensor x = randn({2, 3, 8}, kFloat64).requires_grad_();
  const std::vector<Tensor> parts = split(x, 4, -1);
  const Tensor seen = view(parts[1], {2, 3, 1, 4});
  const Tensor y = refined_log_gate(seen, seen * 0.5, -20.0) + refined_log_gate(seen * 3.0, seen, -20.0);
  const Tensor w = randn(y.shape(), kFloat64);
  backward(sum(y * w));
  const Tensor leaf = contiguous(detach(slice(x, 2, 4, 8))).requires_grad_();
  const Tensor s = view(leaf, {2, 3, 1, 4});
  backward(sum((refined_log_gate(s, s * 0.5, -20.0) + refined_log_gate(s * 3.0, s, -20.0)) * w));
  EXPECT_TRUE(all_close(slice(x.grad(), 2, 4, 8), leaf.grad(), 1e-15, 1e-15));
  EXPECT_TRUE(all_close(slice(x.grad(), 2, 0, 4), zeros({2, 3, 4}, kFloat64), 0, 0));
}

// q, k and v of a scan split off one product, v's gradient written in place by the scan's backward
// (q and k, seen transposed, have homes whose rows are not contiguous: normalized_exp does not
// take those, and their gradients are copied into place as before).
TEST(GradientHome, TheScansInputsAndHomesWithoutContiguousRows) {
  const int64_t B = 2, T = 7, H = 2, d = 4;
  const auto heads = [&](const Tensor& y) { return permute(view(y, {B, T, H, d}), {0, 2, 1, 3}); };
  const auto loss = [&](const std::vector<Tensor>& p, const Tensor& w) {
    const Tensor q = normalized_exp(transpose(heads(p[0]), 2, 3), NormalizedExpMode::RowMax).features;
    const Tensor k = normalized_exp(transpose(heads(p[1]), 2, 3), NormalizedExpMode::RowMax).features;
    const Tensor gv = -exp(heads(p[3]));  // (B, H, T, d): a log decay below 0
    return sum(gated_linear_scan(transpose(q, 2, 3), transpose(k, 2, 3), heads(p[2]), Tensor(), gv) * w);
  };
  const Tensor x = randn({B, T, 4 * H * d}, kFloat64).requires_grad_();
  const Tensor w = randn({B, H, T, d}, kFloat64);
  backward(loss(split(x, H * d, -1), w));
  std::vector<Tensor> separate;
  {
    NoGradGuard no_grad;
    for (const Tensor& p : split(x, H * d, -1)) separate.push_back(contiguous(p));
  }
  for (Tensor& s : separate) s.requires_grad_();
  backward(loss(separate, w));
  const Tensor expected = cat({separate[0].grad(), separate[1].grad(), separate[2].grad(), separate[3].grad()}, -1);
  EXPECT_TRUE(all_close(x.grad(), expected, 0, 0));
}

// With the graph retained, each backward gets the same gradient (its own buffer).
TEST(GradientHome, ARetainedGraphGivesTheSameGradientTwice) {
  const Tensor x = randn({2, 3, 8}, kFloat64).requires_grad_();
  const std::vector<Tensor> parts = split(x, 4, -1);
  const Tensor y = refined_log_gate(view(parts[0], {2, 3, 1, 4}), view(parts[1], {2, 3, 1, 4}), -20.0);
  const Tensor loss = sum(y * randn(y.shape(), kFloat64));
  backward(loss, Tensor(), true);
  const Tensor first = clone(x.grad());
  x.set_grad(Tensor());
  backward(loss);
  EXPECT_TRUE(all_close(x.grad(), first, 0, 0));
}

}  // namespace
}  // namespace linea
