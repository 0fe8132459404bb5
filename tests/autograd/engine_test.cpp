// The backward engine: accumulation, graph lifetime, grad mode, the version counter, deep graphs,
// grad() for chosen inputs, gradients through views, multi-output nodes, and the Graphviz export.
#include <algorithm>
#include <cmath>

#include "autograd/dot.h"
#include "autograd/node.h"
#include "tests/test_util.h"

namespace linea {
namespace {

using testing::all_close;

Tensor leaf(const Shape& shape) { return randn(shape, kFloat64).requires_grad_(); }

// Elementwise f over the values of t, as a new float64 tensor of t's shape.
template <class F>
Tensor map_values(const Tensor& t, F f) {
  std::vector<double> v = t.to_vector<double>();
  for (double& x : v) x = f(x);
  return from_vector(v, t.shape());
}

Tensor product(const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  return a * b;
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// A norm whose input has another consumer made after it finds that consumer's gradient waiting
// and adds it in its own backward (Node::apply_adding); the engine then does not add it again.
// The result is the sum the engine makes when the other consumer comes first, bit for bit.
TEST(Engine, ANormAddsTheGradientWaitingForItsInput) {
  const Tensor x = leaf({5, 7}), w = leaf({7});
  const Tensor u = randn({5, 7}, kFloat64), v = randn({5, 7}, kFloat64);
  const std::vector<Tensor> norm_first = grad(sum(rms_norm(x, w) * u + x * v), {x, w});
  const std::vector<Tensor> other_first = grad(sum(x * v + rms_norm(x, w) * u), {x, w});
  EXPECT_EQ(norm_first[0].to_vector<double>(), other_first[0].to_vector<double>());
  EXPECT_EQ(norm_first[1].to_vector<double>(), other_first[1].to_vector<double>());
  // And it is the norm's gradient plus v.
  const Tensor through_norm = grad(sum(rms_norm(x, w) * u), {x})[0];
  EXPECT_TRUE(all_close(norm_first[0], through_norm + v, 1e-14, 1e-14));
}

TEST(Engine, GradAccumulatesOverBackwardCalls) {
  Tensor x = leaf({3});
  const Tensor w = randn({3}, kFloat64);
  backward(sum(x * w));
  ASSERT_TRUE(x.grad().defined());
  EXPECT_TRUE(all_close(x.grad(), w));
  backward(sum(x * x));
  EXPECT_TRUE(all_close(x.grad(), map_values(x, [](double v) { return 2 * v; }) + w));
  // Clearing is explicit; the next backward starts from nothing.
  x.set_grad(Tensor());
  backward(sum(exp(x)));
  EXPECT_TRUE(all_close(x.grad(), map_values(x, [](double v) { return std::exp(v); })));
  // A scalar leaf is its own output: d s / d s = 1.
  Tensor s = leaf({});
  backward(s);
  backward(s);
  EXPECT_EQ(s.grad().item(), 2.0);
}

TEST(Engine, NonScalarOutputNeedsAnExplicitGradient) {
  Tensor x = leaf({2, 3});
  const Tensor y = exp(x);
  EXPECT_LINEA_ERROR(backward(y), "backward", "non-scalar", "[2, 3]");
  EXPECT_LINEA_ERROR(backward(y, randn({3, 2}, kFloat64)), "backward", "[3, 2]", "[2, 3]");
  EXPECT_LINEA_ERROR(backward(y, randn({2, 3}, kFloat32)), "backward", "float32", "float64");
  const Tensor g = randn({2, 3}, kFloat64);
  backward(y, g);
  EXPECT_TRUE(all_close(x.grad(), product(g, map_values(x, [](double v) { return std::exp(v); }))));
}

TEST(Engine, RetainGraphAllowsASecondBackward) {
  Tensor x = leaf({4});
  const Tensor y = sum(sin(x));
  backward(y, Tensor(), /*retain_graph=*/true);
  backward(y);
  const Tensor cos_x = map_values(x, [](double v) { return std::cos(v); });
  EXPECT_TRUE(all_close(x.grad(), product(cos_x, full({4}, 2.0, kFloat64))));
  // The second backward freed the graph.
  EXPECT_LINEA_ERROR(backward(y), "backward", "retain_graph");
}

TEST(Engine, NoGradGuardRecordsNothing) {
  Tensor x = leaf({3});
  EXPECT_TRUE(is_grad_enabled());
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(is_grad_enabled());
    const Tensor y = exp(x) * x + 1.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    {
      NoGradGuard nested;
      EXPECT_FALSE(is_grad_enabled());
    }
    EXPECT_FALSE(is_grad_enabled()) << "leaving a nested guard must not re-enable grad mode";
    EXPECT_LINEA_ERROR(backward(sum(y)), "backward", "does not require grad");
  }
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_TRUE((x * 2.0).requires_grad());
}

TEST(Engine, DetachCutsTheGraph) {
  Tensor x = leaf({5});
  const Tensor d = detach(x);
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.storage(), x.storage());
  // Only the attached factor passes a gradient: d(sum(d * x))/dx = d.
  backward(sum(d * x));
  EXPECT_TRUE(all_close(x.grad(), d));
  const Tensor y = detach(exp(x));
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
}

TEST(Engine, ModifyingASavedTensorInPlaceIsAnError) {
  {  // exp saves its output
    Tensor x = leaf({3});
    Tensor y = exp(x);
    const Tensor loss = sum(y);
    {
      NoGradGuard no_grad;
      mul_(y, 2.0);
    }
    EXPECT_LINEA_ERROR(backward(loss), "backward", "modified in place");
  }
  {  // mul saves each operand for the other's gradient
    Tensor a = leaf({2, 2});
    Tensor c = randn({2, 2}, kFloat64);
    const Tensor loss = sum(a * c);
    add_(c, randn({2, 2}, kFloat64));  // c does not require grad: allowed with grad mode on
    EXPECT_LINEA_ERROR(backward(loss), "backward", "modified in place", "float64[2, 2]");
  }
  {  // a write through a view bumps the shared counter too
    Tensor a = leaf({4});
    Tensor c = randn({4}, kFloat64);
    const Tensor loss = sum(a * c);
    Tensor part = slice(c, 0, 1, 3);
    fill_(part, 0.5);
    EXPECT_LINEA_ERROR(backward(loss), "modified in place");
  }
}

TEST(Engine, ModifyingATensorBackwardDoesNotNeedIsAllowed) {
  // add needs neither operand, and exp only its output: changing their inputs afterwards is fine.
  Tensor a = leaf({3});
  Tensor c = randn({3}, kFloat64);
  const Tensor loss = sum(a + c) + sum(exp(a));
  const Tensor exp_a = map_values(a, [](double v) { return std::exp(v); });
  add_(c, randn({3}, kFloat64));
  {
    NoGradGuard no_grad;
    mul_(a, 3.0);
  }
  backward(loss);
  EXPECT_TRUE(all_close(a.grad(), exp_a + 1.0));
}

TEST(Engine, DeepChainDoesNotOverflowTheStack) {
  constexpr int kOps = 100000;
  constexpr double kFactor = 1.00001;
  {
    Tensor x = leaf({2});
    Tensor y = x;
    for (int i = 0; i < kOps; ++i) y = y * kFactor;
    backward(sum(y));
    const std::vector<double> g = x.grad().to_vector<double>();
    for (double v : g) EXPECT_NEAR(v, std::pow(kFactor, kOps), 1e-8);
  }  // the released graph is destroyed here
  {
    Tensor x = leaf({2});
    Tensor y = x;
    for (int i = 0; i < kOps; ++i) y = i % 2 ? exp(y) : neg(y);  // stays within [-1, 1]
    EXPECT_FALSE(to_dot(y).empty());  // the export walks the whole chain iteratively too
  }  // a graph that never ran backward, saved tensors and all, is destroyed here
  SUCCEED();
}

TEST(Engine, GradReturnsGradientsWithoutTouchingDotGrad) {
  Tensor x = leaf({3});
  const Tensor w = randn({3}, kFloat64);
  const Tensor h = exp(x);
  const Tensor loss = sum(h * w);
  const Tensor exp_x = map_values(x, [](double v) { return std::exp(v); });

  const std::vector<Tensor> gh = grad(loss, {h}, Tensor(), /*retain_graph=*/true);
  ASSERT_EQ(gh.size(), 1u);
  EXPECT_TRUE(all_close(gh[0], w));
  const std::vector<Tensor> gx = grad(loss, {x}, Tensor(), true);
  EXPECT_TRUE(all_close(gx[0], product(w, exp_x)));
  // An intermediate and a leaf behind it, together.
  const std::vector<Tensor> both = grad(loss, {h, x}, Tensor(), true);
  ASSERT_EQ(both.size(), 2u);
  EXPECT_TRUE(all_close(both[0], w));
  EXPECT_TRUE(all_close(both[1], product(w, exp_x)));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(h.grad().defined());

  Tensor unused = leaf({2});
  EXPECT_LINEA_ERROR(grad(loss, {x, unused}, Tensor(), true), "grad", "allow_unused", "float64[2]");
  const std::vector<Tensor> partial = grad(loss, {unused, x}, Tensor(), true, /*allow_unused=*/true);
  EXPECT_FALSE(partial[0].defined());
  EXPECT_TRUE(all_close(partial[1], product(w, exp_x)));
  EXPECT_LINEA_ERROR(grad(loss, {w}), "grad", "require grad");
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(unused.grad().defined());
}

TEST(Engine, GradientsThroughViewsLandInPlace) {
  {  // every second column, columns 1 and 3
    Tensor x = leaf({3, 4});
    const Tensor w = randn({3, 2}, kFloat64);
    backward(sum(slice(x, 1, 1, 4, 2) * w));
    const std::vector<double> g = x.grad().to_vector<double>(), wv = w.to_vector<double>();
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(g[i * 4 + j], j % 2 ? wv[i * 2 + j / 2] : 0.0) << i << "," << j;
  }
  {  // a broadcast row collects the sum over the rows it was copied to
    Tensor r = leaf({1, 4});
    const Tensor w = randn({3, 4}, kFloat64);
    backward(sum(expand(r, {3, 4}) * w));
    const std::vector<double> g = r.grad().to_vector<double>(), wv = w.to_vector<double>();
    for (int64_t j = 0; j < 4; ++j) EXPECT_NEAR(g[j], wv[j] + wv[4 + j] + wv[8 + j], 1e-12);
  }
  {  // a permutation sends each gradient back to its source element
    Tensor x = leaf({2, 3, 4});
    const Tensor w = randn({4, 2, 3}, kFloat64);
    backward(sum(permute(x, {2, 0, 1}) * w));
    const std::vector<double> g = x.grad().to_vector<double>(), wv = w.to_vector<double>();
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(g[(i * 3 + j) * 4 + k], wv[(k * 2 + i) * 3 + j]);
  }
  {  // overlapping reads through two views add up
    Tensor x = leaf({5});
    backward(sum(narrow(x, 0, 0, 3)) + sum(narrow(x, 0, 2, 3)) * 2.0 + select(x, 0, -1));
    EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 1, 3, 2, 3}));
  }
}

TEST(Engine, RequiresGradOnlyOnLeaves) {
  Tensor x = leaf({2});
  Tensor y = x * 2.0;
  EXPECT_FALSE(y.is_leaf());
  EXPECT_LINEA_ERROR(y.requires_grad_(), "requires_grad_", "leaf");
  Tensor z = detach(y);
  z.requires_grad_();
  EXPECT_TRUE(z.requires_grad());
}

TEST(Engine, InPlaceOnATensorRequiringGradNeedsNoGradMode) {
  Tensor x = leaf({3});
  const std::vector<double> before = x.to_vector<double>();
  EXPECT_LINEA_ERROR(add_(x, randn({3}, kFloat64)), "add_", "requires grad", "float64[3]");
  EXPECT_LINEA_ERROR(mul_(x, 2.0), "mul_", "requires grad");
  EXPECT_LINEA_ERROR(fill_(x, 0.0), "fill_", "requires grad");
  EXPECT_LINEA_ERROR(copy_(x, randn({3}, kFloat64)), "copy_", "requires grad");
  EXPECT_EQ(x.to_vector<double>(), before) << "a refused in-place op must not write";
  {
    NoGradGuard no_grad;
    mul_(x, 2.0);
  }
  const std::vector<double> after = x.to_vector<double>();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i], 2 * before[i]);
}

TEST(Engine, DotExportNamesOpsAndLeaves) {
  Tensor x = leaf({2, 3});
  Tensor w = leaf({3, 4});
  x.set_name("input");
  w.set_name("weight");
  const std::string dot = to_dot(sum(tanh(matmul(x, w))));
  for (const char* part : {"digraph", "matmul", "tanh", "sum", "input", "weight", "[2, 3]", "[3, 4]"})
    EXPECT_NE(dot.find(part), std::string::npos) << dot << " lacks " << part;
  // Plausible Graphviz: one digraph block, balanced braces and quotes, statements end in ';'.
  EXPECT_EQ(dot.rfind("digraph", 0), 0u) << dot;
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
  EXPECT_EQ(occurrences(dot, "{"), occurrences(dot, "}"));
  EXPECT_EQ(occurrences(dot, "\"") % 2, 0u);
  size_t statements = 0;
  for (size_t begin = dot.find('\n') + 1, end; (end = dot.find('\n', begin)) != std::string::npos; begin = end + 1) {
    const std::string line = dot.substr(begin, end - begin);
    if (line == "}") continue;
    EXPECT_EQ(line.back(), ';') << line;
    ++statements;
  }
  EXPECT_GT(statements, 5u);
  EXPECT_EQ(occurrences(dot, "shape=box"), 3u);      // matmul, tanh, sum
  EXPECT_EQ(occurrences(dot, "shape=ellipse"), 2u);  // x and w
  EXPECT_NE(to_dot(randn({2})).find("no graph"), std::string::npos);
}

TEST(Engine, DiamondGraphsSumGradients) {
  Tensor x = leaf({4});
  const Tensor h = exp(x);
  // Both factors depend on h: d/dx [h sin h] = (sin h + h cos h) h.
  backward(sum(h * sin(h)));
  const Tensor expected = map_values(x, [](double v) {
    const double e = std::exp(v);
    return (std::sin(e) + e * std::cos(e)) * e;
  });
  EXPECT_TRUE(all_close(x.grad(), expected, 1e-10, 1e-12));

  Tensor z = leaf({3});
  backward(sum(z * z + z));
  EXPECT_TRUE(all_close(z.grad(), map_values(z, [](double v) { return 2 * v + 1; })));
}

// An op with two outputs (a = 2x, b = x^2) as one node (record_outputs): the backward receives each
// output's gradient (undefined where none arrived), whichever of them the loss reaches, through
// views too, and grad() can stop at either output.
struct TwoOutputs {
  Tensor a, b;
  std::shared_ptr<std::vector<int>> defined_seen = std::make_shared<std::vector<int>>();
};
TwoOutputs two_outputs(const Tensor& x) {
  TwoOutputs r;
  Tensor a, b;
  {
    NoGradGuard no_grad;
    a = x * 2.0;
    b = x * x;
  }
  const std::vector<Tensor> out = autograd::record_outputs(
      "two_outputs", {x}, {a, b},
      [saved = autograd::SavedTensor(x), seen = r.defined_seen](const std::vector<Tensor>& g) -> autograd::Grads {
        seen->push_back(static_cast<int>(g[0].defined()) + 2 * static_cast<int>(g[1].defined()));
        const Tensor x = saved.get();
        Tensor dx = zeros(x.shape(), {x.dtype(), x.device()});
        if (g[0].defined()) dx = dx + g[0] * 2.0;
        if (g[1].defined()) dx = dx + g[1] * (x * 2.0);
        return {dx};
      });
  r.a = out[0];
  r.b = out[1];
  return r;
}

TEST(Engine, MultiOutputNodesGetEachOutputsGradient) {
  Tensor x = leaf({4});
  const Tensor w = randn({4}, kFloat64), u = randn({4}, kFloat64);
  const Tensor two_x = map_values(x, [](double v) { return 2 * v; });

  TwoOutputs y = two_outputs(x);
  ASSERT_EQ(y.a.grad_fn(), y.b.grad_fn());
  EXPECT_EQ(y.a.grad_fn()->outputs(), 2);
  EXPECT_EQ(autograd::gradient_output(y.a), 0);
  EXPECT_EQ(autograd::gradient_output(y.b), 1);
  backward(sum(y.a * w));  // a alone
  EXPECT_TRUE(all_close(x.grad(), w * 2.0));
  x.set_grad(Tensor());

  y = two_outputs(x);
  backward(sum(y.b * u));  // b alone
  EXPECT_TRUE(all_close(x.grad(), product(u, two_x)));
  x.set_grad(Tensor());

  // Both, b through a view and used twice: each output's gradients are summed on their own.
  y = two_outputs(x);
  const Tensor b2 = reshape(y.b, {2, 2});
  backward(sum(y.a * w) + sum(b2 * reshape(u, {2, 2})) + sum(y.b));
  EXPECT_TRUE(all_close(x.grad(), w * 2.0 + product(u + 1.0, two_x), 1e-12));
  EXPECT_EQ(*y.defined_seen, std::vector<int>{3});  // one call, both gradients defined
  x.set_grad(Tensor());

  // grad() stops at either output.
  y = two_outputs(x);
  const Tensor loss = sum(y.a * w) + sum(y.b * u);
  const std::vector<Tensor> g = grad(loss, {y.b, y.a, x}, Tensor(), /*retain_graph=*/true);
  EXPECT_TRUE(all_close(g[0], u));
  EXPECT_TRUE(all_close(g[1], w));
  EXPECT_TRUE(all_close(g[2], w * 2.0 + product(u, two_x), 1e-12));
  EXPECT_FALSE(x.grad().defined());
  // A backward of the second output alone seeds that output.
  y = two_outputs(x);
  backward(y.b, u);
  EXPECT_TRUE(all_close(x.grad(), product(u, two_x)));
  EXPECT_EQ(*y.defined_seen, std::vector<int>{2});
}

TEST(Engine, ALeafUsedTwiceHasOneAccumulator) {
  Tensor x = leaf({3});
  x.set_name("x");
  const Tensor y = x * x;
  const auto& edges = y.grad_fn()->edges;
  ASSERT_EQ(edges.size(), 2u);
  EXPECT_EQ(edges[0].node, edges[1].node);
  EXPECT_EQ(edges[0].node, autograd::gradient_edge(x));
  const Tensor loss = sum(y * exp(x));
  EXPECT_EQ(occurrences(to_dot(loss), "shape=ellipse"), 1u);
  backward(loss);
  // d/dx x^2 e^x = (2x + x^2) e^x, accumulated once into one .grad.
  EXPECT_TRUE(all_close(x.grad(), map_values(x, [](double v) { return (2 * v + v * v) * std::exp(v); }), 1e-10));
}

// The cross-entropy's backward writes the logits' gradient over the logits when it is their last
// reader and nothing else holds them (SavedTensor::overwritable), and only then: not with the graph
// retained (a second backward reads them again), not while the caller holds them. An op that passes
// its gradient through to a leaf, which keeps it (ALeafKeepsAGradientNothingElseReaches), shows
// where the gradient was written. Every way gives the same bits.
TEST(Engine, ABackwardOverwritesWhatItAloneSaved) {
  const Tensor targets = from_vector(std::vector<int64_t>{2, 0, 4, 1, 3, 2}, {6});
  const Tensor values = randn({6, 5}, kFloat64) * 3.0;
  // loss = cross_entropy(logits), logits = a fresh copy of a's values passing its gradient on.
  const auto run = [&](Tensor& a, bool hold_logits, bool retain, int passes) {
    Tensor held;
    const void* logits_memory = nullptr;
    Tensor loss;
    {
      const Tensor logits = autograd::record("pass_through", {a}, product(a, full(a.shape(), 1.0, kFloat64)),
                                             [](const Tensor& g) -> autograd::Grads { return {g}; });
      logits_memory = logits.raw_data();
      if (hold_logits) held = logits;
      loss = cross_entropy(logits, targets);
    }
    for (int pass = 0; pass < passes; ++pass) backward(loss, Tensor(), retain);
    return a.grad().raw_data() == logits_memory;
  };
  Tensor alone = leaf({6, 5}), held = leaf({6, 5}), retained = leaf({6, 5});
  for (Tensor* a : {&alone, &held, &retained}) {
    NoGradGuard no_grad;
    copy_(*a, values);
  }
  EXPECT_TRUE(run(alone, false, false, 1)) << "the gradient took the logits' memory";
  EXPECT_FALSE(run(held, true, false, 1)) << "the caller holds the logits";
  EXPECT_FALSE(run(retained, false, true, 2)) << "the graph is retained";
  EXPECT_TRUE(all_close(alone.grad(), held.grad(), 0));
  EXPECT_TRUE(all_close(retained.grad(), alone.grad() * 2.0, 0)) << "the second backward read the logits intact";
}

// A leaf keeps its first gradient without a copy when nothing else can reach it, and copies it when
// something can: a gradient another node also received, one its node still holds (a retained
// graph), or one the caller holds. Whatever was kept, the gradients stay right and never alias.
TEST(Engine, ALeafKeepsAGradientNothingElseReaches) {
  // An op of a's whose backward makes a fresh gradient (kept), or hands out one it also holds.
  const void* made = nullptr;
  Tensor held;
  const auto op = [&](const Tensor& a, bool hold) {
    return autograd::record("test_op", {a}, product(a, full(a.shape(), 3.0, kFloat64)),
                            [&, hold](const Tensor& g) -> autograd::Grads {
                              Tensor out = product(g, full(g.shape(), 3.0, kFloat64));
                              made = out.raw_data();
                              if (hold) held = out;
                              return {out};
                            });
  };
  Tensor a = leaf({2, 3});
  backward(sum(op(a, false)));
  EXPECT_EQ(a.grad().raw_data(), made) << "kept, not copied";
  EXPECT_TRUE(all_close(a.grad(), full({2, 3}, 3.0, kFloat64), 0));
  Tensor b = leaf({2, 3});
  backward(sum(op(b, true)));
  EXPECT_NE(b.grad().raw_data(), made) << "copied: the op's closure still holds its gradient";
  fill_(held, 0.0);
  EXPECT_TRUE(all_close(b.grad(), full({2, 3}, 3.0, kFloat64), 0));

  // y = c + d hands the same gradient to both leaves: one of them must copy it. Two passes add up,
  // and a change to one leaf's gradient leaves the other's alone.
  Tensor c = leaf({4}), d = leaf({4});
  for (int pass = 0; pass < 2; ++pass) backward(sum(c + d));
  EXPECT_NE(c.grad().raw_data(), d.grad().raw_data());
  Tensor c_grad = c.grad();
  fill_(c_grad, 0.0);
  EXPECT_TRUE(all_close(d.grad(), full({4}, 2.0, kFloat64), 0));

  // A retained graph runs the same nodes twice: the second pass must not add into what the first
  // kept (the mean's backward makes its gradient afresh each pass, so this checks the sum).
  Tensor e = leaf({5});
  const Tensor loss = mean(e * 2.0);
  backward(loss, Tensor(), /*retain_graph=*/true);
  backward(loss);
  EXPECT_TRUE(all_close(e.grad(), full({5}, 0.8, kFloat64), 1e-15));

  // The caller's own gradient for a leaf it differentiates directly is copied, not taken.
  Tensor f = leaf({3});
  Tensor seed = full({3}, 5.0, kFloat64);
  backward(f, seed);
  fill_(seed, 0.0);
  EXPECT_TRUE(all_close(f.grad(), full({3}, 5.0, kFloat64), 0));
}

}  // namespace
}  // namespace linea
