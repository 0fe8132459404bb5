// Runs every row of the gradient-check table (autograd/gradcheck_cases.h) as its own test, and
// checks that the checker itself fails a wrong gradient, so a passing table means something.
#include <cctype>
#include <set>

#include "autograd/gradcheck_cases.h"
#include "autograd/node.h"
#include "tests/test_util.h"

namespace linea {
namespace {

using gradcheck::Case;

const std::vector<Case>& table() {
  static const std::vector<Case> cases = gradcheck::op_cases();
  return cases;
}

// GoogleTest names allow only letters, digits and '_'.
std::string test_name(const std::string& case_name) {
  std::string out = case_name;
  for (char& ch : out)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return out;
}

class GradcheckTable : public ::testing::TestWithParam<size_t> {};

TEST_P(GradcheckTable, MatchesFiniteDifferences) {
  const Case& c = table()[GetParam()];
  const gradcheck::Result r = gradcheck::run_case(c);
  EXPECT_TRUE(r.passed) << c.name << ": worst error " << r.worst_error << " above tolerance " << c.options.tolerance
                        << "\n  " << r.detail;
}

INSTANTIATE_TEST_SUITE_P(OpCases, GradcheckTable, ::testing::Range<size_t>(0, table().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return test_name(table()[info.param].name);
                         });

TEST(GradcheckTableShape, HasEnoughRowsWithUniqueNames) {
  EXPECT_GE(table().size(), 60u);
  std::set<std::string> names, gtest_names;
  for (const Case& c : table()) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name " << c.name;
    EXPECT_TRUE(gtest_names.insert(test_name(c.name)).second) << "two names sanitize to " << test_name(c.name);
    EXPECT_FALSE(c.op.empty()) << c.name;
    EXPECT_EQ(c.name.substr(0, c.op.size() + 1), c.op + "/") << "a name must start with its op: " << c.name;
  }
}

TEST(GradcheckTableShape, CoversEveryDifferentiableOp) {
  std::set<std::string> ops;
  for (const Case& c : table()) ops.insert(c.op);
  const char* expected[] = {
      "view", "reshape", "permute", "transpose", "t", "narrow", "slice", "select", "expand", "squeeze",
      "unsqueeze", "flatten", "contiguous", "clone", "to", "cat", "stack", "split", "chunk",
      "neg", "exp", "log", "sqrt", "rsqrt", "abs", "sin", "cos", "tanh", "sigmoid", "logsigmoid", "softplus",
      "relu", "elu", "gelu", "silu", "pow", "clamp", "square", "reciprocal", "log1p", "expm1",
      "add", "sub", "mul", "div", "maximum", "minimum", "where", "masked_fill", "tril", "triu",
      "sum", "mean", "amax", "amin", "max", "min", "logsumexp", "var", "cumsum", "sum_to", "matmul",
      "softmax", "log_softmax", "cross_entropy", "layer_norm", "rms_norm",
      "index_select", "gather", "scatter_add", "embedding", "dropout", "gated_linear_scan",
  };
  for (const char* op : expected) EXPECT_TRUE(ops.count(op)) << "no gradient-check case for " << op;
}

// check() runs no backward when the output is empty, so the rows with an empty input are
// backpropagated here: each gradient must come back with its input's shape.
TEST(GradcheckTableShape, ZeroSizeRowsBackpropagate) {
  int ran = 0;
  for (const Case& c : table()) {
    Generator gen(1);
    std::vector<Tensor> xs = c.make_inputs(gen);
    bool any_empty = false;
    for (Tensor& x : xs) {
      any_empty |= x.numel() == 0;
      x.requires_grad_(true);
    }
    if (!any_empty) continue;
    const Tensor y = c.f(xs);
    if (!y.requires_grad()) continue;
    const std::vector<Tensor> g = grad(y, xs, ones_like(y), false, true);
    for (size_t i = 0; i < xs.size(); ++i)
      if (g[i].defined()) EXPECT_EQ(g[i].shape(), xs[i].shape()) << c.name << " input " << i;
    ++ran;
  }
  EXPECT_GE(ran, 20);
}

// y = x * x recorded with a chosen backward, so the checker can be shown a wrong one.
Tensor square_with_backward(const Tensor& x, std::function<Tensor(const Tensor& x, const Tensor& gy)> backward) {
  const Tensor y = detach(x) * detach(x);
  return autograd::record("square_under_test", {x}, y,
                          [xs = autograd::SavedTensor(x), backward](const Tensor& gy) -> autograd::Grads {
                            return {backward(xs.get(), gy)};
                          });
}

gradcheck::Result check_square(std::function<Tensor(const Tensor&, const Tensor&)> backward, const Shape& shape) {
  Generator gen(3);
  return gradcheck::check([backward](const std::vector<Tensor>& x) { return square_with_backward(x[0], backward); },
                          {randn(shape, kFloat64, &gen)});
}

TEST(GradcheckCatchesWrongGradients, RightBackwardPasses) {
  const auto right = [](const Tensor& x, const Tensor& gy) { return 2.0 * x * gy; };
  for (const Shape& shape : {Shape{3, 4}, Shape{40, 30}}) {  // element by element, then along directions
    const gradcheck::Result r = check_square(right, shape);
    EXPECT_TRUE(r.passed) << r.detail;
    EXPECT_GT(r.compared, 0);
  }
}

TEST(GradcheckCatchesWrongGradients, WrongFactorFails) {
  const auto wrong = [](const Tensor& x, const Tensor& gy) { return 3.0 * x * gy; };
  for (const Shape& shape : {Shape{3, 4}, Shape{40, 30}}) {
    const gradcheck::Result r = check_square(wrong, shape);
    EXPECT_FALSE(r.passed) << "a gradient of 3x for x^2 passed on " << shape_str(shape);
    EXPECT_GT(r.worst_error, 1e-2);
  }
}

TEST(GradcheckCatchesWrongGradients, OneWrongElementFails) {
  // Off by 1e-4 in a single element: far below what a loss curve would show, far above tolerance.
  const auto almost = [](const Tensor& x, const Tensor& gy) {
    std::vector<double> bump(x.numel(), 0.0);
    bump[5] = 1e-4;
    return 2.0 * x * gy + from_vector(bump, x.shape());
  };
  const gradcheck::Result r = check_square(almost, {3, 4});
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.detail.find("element 5"), std::string::npos) << r.detail;
}

TEST(GradcheckCatchesWrongGradients, MissingGradientFails) {
  const auto none = [](const Tensor&, const Tensor&) { return Tensor(); };
  EXPECT_FALSE(check_square(none, {3, 4}).passed);
}

}  // namespace
}  // namespace linea
