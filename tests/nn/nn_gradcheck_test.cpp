// Runs every nn row of the gradient-check table (nn/gradcheck_cases.h) as its own test: each
// module's output checked against finite differences w.r.t. its input and all its parameters.
#include <algorithm>
#include <cctype>
#include <set>

#include "nn/gradcheck_cases.h"
#include "nn/gradcheck_module.h"
#include "nn/layers/linear.h"
#include "tests/test_util.h"

namespace linea::nn {
namespace {

using gradcheck::Case;

const std::vector<Case>& table() {
  static const std::vector<Case> cases = module_cases();
  return cases;
}

std::string gtest_name(std::string name) {
  std::replace_if(name.begin(), name.end(), [](unsigned char ch) { return !std::isalnum(ch); }, '_');
  return name;
}

// Passes when the row's check passes at the default seed, which is exactly what `linea
// gradcheck` reports; otherwise says where the worst error was.
::testing::AssertionResult row_passes(const Case& row) {
  const gradcheck::Result result = gradcheck::run_case(row);
  if (result.passed && result.compared > 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << row.name << " compared " << result.compared << " values, worst error "
                                       << result.worst_error << " (tolerance " << row.options.tolerance << ")\n  "
                                       << result.detail;
}

class ModuleGradcheck : public ::testing::TestWithParam<size_t> {};

TEST_P(ModuleGradcheck, MatchesFiniteDifferences) { EXPECT_TRUE(row_passes(table()[GetParam()])); }

INSTANTIATE_TEST_SUITE_P(Modules, ModuleGradcheck, ::testing::Range<size_t>(0, table().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return gtest_name(table()[info.param].name); });

TEST(ModuleGradcheckTable, NamesAreUniqueAndCoverEveryLayer) {
  std::set<std::string> names, ops;
  for (const Case& c : table()) {
    EXPECT_TRUE(names.insert(gtest_name(c.name)).second) << "duplicate case name " << c.name;
    EXPECT_EQ(c.name.substr(0, c.op.size() + 1), c.op + "/") << c.name;
    ops.insert(c.op);
  }
  for (const char* op : {"Linear", "Embedding", "LayerNorm", "RMSNorm", "HeadNorm", "Dropout", "MLP", "GatedMLP",
                         "RoPE", "CausalConv1D"})
    EXPECT_TRUE(ops.count(op)) << "no gradient-check row for " << op;
}

// The module helper must see every parameter: a forward that ignores one, or a wrong backward
// through one, has to fail the check.
TEST(ModuleGradcheckHelper, ChecksParametersAndRestoresThem) {
  Generator gen(1);
  Linear lin(3, 2, gen);
  lin.to(kFloat64);
  const Tensor weight_before = lin.weight;
  const Tensor x = randn({4, 3}, kFloat64, &gen);
  const auto forward = [](Module& m, const std::vector<Tensor>& in) { return static_cast<Linear&>(m).forward(in[0]); };
  const gradcheck::Result right = check_module(lin, {x}, forward);
  EXPECT_TRUE(right.passed) << right.detail;
  EXPECT_GE(right.compared, 12 + 6 + 2);  // at least every entry of x, W and b
  EXPECT_TRUE(lin.weight.is_same(weight_before));  // the module's own tensors are back
  // The bias reaches the output only through a detached copy: its gradient is missing.
  const auto detached_bias = [](Module& m, const std::vector<Tensor>& in) {
    Linear& l = static_cast<Linear&>(m);
    return matmul(in[0], t(l.weight)) + detach(l.bias);
  };
  const gradcheck::Result wrong = check_module(lin, {x}, detached_bias);
  EXPECT_FALSE(wrong.passed);
}

}  // namespace
}  // namespace linea::nn
