// Rows for the elementwise ops: unary, binary (with NumPy broadcasting and the scalar operators)
// and selection by masks (where, masked_fill, tril, triu).
#include "autograd/gradcheck_cases_build.h"

namespace linea::gradcheck::cases {

namespace {

// Keeps log, sqrt, rsqrt, reciprocal and fractional powers well inside their domain.
Draw positive() { return in_range(0.5, 2.0); }

struct UnaryOp {
  std::string name;  // "<op>" or "<op>/<variant>"
  Unary fn;
  Draw draw;
};

std::vector<UnaryOp> unary_ops() {
  const double lo = -0.5, hi = 0.7;  // clamp bounds
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, normal()},
      {"neg/operator", [](const Tensor& x) { return -x; }, normal()},
      {"exp", [](const Tensor& x) { return exp(x); }, normal()},
      {"log", [](const Tensor& x) { return log(x); }, positive()},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, positive()},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, positive()},
      {"abs", [](const Tensor& x) { return abs(x); }, away_from({0.0})},
      {"sin", [](const Tensor& x) { return sin(x); }, normal(2.0)},
      {"cos", [](const Tensor& x) { return cos(x); }, normal(2.0)},
      {"tanh", [](const Tensor& x) { return tanh(x); }, normal()},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, normal(2.0)},
      {"logsigmoid", [](const Tensor& x) { return logsigmoid(x); }, normal(3.0)},
      {"softplus", [](const Tensor& x) { return softplus(x); }, normal(3.0)},
      {"relu", [](const Tensor& x) { return relu(x); }, away_from({0.0})},
      {"elu", [](const Tensor& x) { return elu(x); }, away_from({0.0})},
      {"elu/alpha_0.5", [](const Tensor& x) { return elu(x, 0.5); }, away_from({0.0})},
      {"gelu", [](const Tensor& x) { return gelu(x); }, normal(2.0)},
      {"gelu/tanh", [](const Tensor& x) { return gelu(x, GeluApprox::Tanh); }, normal(2.0)},
      {"silu", [](const Tensor& x) { return silu(x); }, normal(2.0)},
      {"pow/scalar_3", [](const Tensor& x) { return pow(x, 3.0); }, normal()},
      {"pow/scalar_0.5", [](const Tensor& x) { return pow(x, 0.5); }, positive()},
      {"pow/scalar_-1.5", [](const Tensor& x) { return pow(x, -1.5); }, positive()},
      {"clamp", [=](const Tensor& x) { return clamp(x, lo, hi); }, away_from({lo, hi})},
      {"clamp/min_only", [=](const Tensor& x) { return clamp(x, lo, std::nullopt); }, away_from({lo})},
      {"clamp/max_only", [=](const Tensor& x) { return clamp(x, std::nullopt, hi); }, away_from({hi})},
      {"square", [](const Tensor& x) { return square(x); }, normal()},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, away_from({0.0}, 0.5)},
      {"log1p", [](const Tensor& x) { return log1p(x); }, in_range(-0.5, 2.0)},
      {"expm1", [](const Tensor& x) { return expm1(x); }, normal()},
      // Piecewise constant: autograd gives no gradient, and away from 0 the true one is zero.
      {"sign", [](const Tensor& x) { return sign(x); }, away_from({0.0})},
  };
}

struct BinaryOp {
  std::string name;
  Binary fn;
  Draw draw_a, draw_b;
};

std::vector<BinaryOp> binary_ops() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, normal(), normal()},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, normal(), normal()},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, normal(), normal()},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, normal(), away_from({0.0}, 0.5)},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, positive(), normal()},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, interleaved(true),
       interleaved(false)},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, interleaved(true),
       interleaved(false)},
  };
}

struct BinaryLayout {
  std::string name;
  Shape a, b;
  Unary view_a, view_b;
};

std::vector<BinaryLayout> binary_layouts() {
  const Unary transposed = [](const Tensor& x) { return transpose(x, 0, 1); };
  return {
      {"same_shape", {3, 4}, {3, 4}, identity, identity},
      {"broadcast", {3, 1, 4}, {5, 1}, identity, identity},
      {"scalar_rhs", {3, 4}, {}, identity, identity},
      {"scalar_lhs", {}, {3, 4}, identity, identity},
      {"strided", {4, 3}, {3, 8}, transposed, [](const Tensor& x) { return slice(x, 1, 0, 8, 2); }},
      {"expanded", {3, 1}, {4}, [](const Tensor& x) { return expand(x, {3, 4}); }, identity},
      {"zero_size", {0, 3}, {1, 3}, identity, identity},
  };
}

void add_binary_row(Table& table, const std::string& name, const BinaryOp& op, const Shape& a, const Shape& b,
                    Unary view_a = identity, Unary view_b = identity) {
  add(table, name, inputs({a, b}, {op.draw_a, op.draw_b}),
      [fn = op.fn, view_a, view_b](const std::vector<Tensor>& x) { return fn(view_a(x[0]), view_b(x[1])); });
}

// The operator forms: Tensor op Tensor (broadcasting), and a double on either side, so each
// overload's placement of the scalar is checked.
void add_operator_cases(Table& table) {
  const std::vector<BinaryOp> tensor_ops = {
      {"add/operator", [](const Tensor& a, const Tensor& b) { return a + b; }, normal(), normal()},
      {"sub/operator", [](const Tensor& a, const Tensor& b) { return a - b; }, normal(), normal()},
      {"mul/operator", [](const Tensor& a, const Tensor& b) { return a * b; }, normal(), normal()},
      {"div/operator", [](const Tensor& a, const Tensor& b) { return a / b; }, normal(), away_from({0.0}, 0.5)},
  };
  for (const BinaryOp& op : tensor_ops) add_binary_row(table, op.name, op, {3, 1, 4}, {5, 1});
  const std::vector<UnaryOp> scalar_ops = {
      {"add/operator_scalar_rhs", [](const Tensor& x) { return x + 1.5; }, normal()},
      {"add/operator_scalar_lhs", [](const Tensor& x) { return 1.5 + x; }, normal()},
      {"sub/operator_scalar_rhs", [](const Tensor& x) { return x - 1.5; }, normal()},
      {"sub/operator_scalar_lhs", [](const Tensor& x) { return 1.5 - x; }, normal()},
      {"mul/operator_scalar_rhs", [](const Tensor& x) { return x * -2.5; }, normal()},
      {"mul/operator_scalar_lhs", [](const Tensor& x) { return -2.5 * x; }, normal()},
      {"div/operator_scalar_rhs", [](const Tensor& x) { return x / -2.5; }, normal()},
      {"div/operator_scalar_lhs", [](const Tensor& x) { return -2.5 / x; }, away_from({0.0}, 0.5)},
  };
  for (const UnaryOp& op : scalar_ops) add_single(table, op.name, {3, 4}, op.fn, op.draw);
}

}  // namespace

void add_unary_cases(Table& table) {
  for (const UnaryOp& op : unary_ops())
    for (const Layout& layout : elementwise_layouts()) {
      const std::string sep = op.name.find('/') == std::string::npos ? "/" : "_";
      add_single(table, op.name + sep + layout.name, layout.shape,
                 [fn = op.fn, view = layout.view](const Tensor& x) { return fn(view(x)); }, op.draw);
    }
}

void add_binary_cases(Table& table) {
  for (const BinaryOp& op : binary_ops())
    for (const BinaryLayout& layout : binary_layouts())
      add_binary_row(table, op.name + "/" + layout.name, op, layout.a, layout.b, layout.view_a, layout.view_b);
  add_operator_cases(table);
}

void add_selection_cases(Table& table) {
  // where: cond (3, 1) against a (3, 4) and b (4) broadcasts all three ways.
  const Tensor cond_col = bool_pattern({3, 1}, 11), cond_full = bool_pattern({3, 4}, 12);
  add(table, "where/broadcast", inputs({{3, 4}, {4}}),
      [cond_col](const std::vector<Tensor>& x) { return where(cond_col, x[0], x[1]); });
  add(table, "where/same_shape", inputs({{3, 4}, {3, 4}}),
      [cond_full](const std::vector<Tensor>& x) { return where(cond_full, x[0], x[1]); });
  add(table, "where/strided", inputs({{4, 3}, {3, 8}}), [cond_full](const std::vector<Tensor>& x) {
    return where(cond_full, transpose(x[0], 0, 1), slice(x[1], 1, 0, 8, 2));
  });
  add(table, "where/scalar_branch", inputs({{}, {3, 4}}),
      [cond_full](const std::vector<Tensor>& x) { return where(cond_full, x[0], x[1]); });
  const Tensor cond_empty = bool_pattern({0, 4}, 13);
  add(table, "where/zero_size", inputs({{0, 4}, {4}}),
      [cond_empty](const std::vector<Tensor>& x) { return where(cond_empty, x[0], x[1]); });

  const Tensor mask_row = bool_pattern({4}, 14);
  add_single(table, "masked_fill/broadcast_mask", {3, 4},
             [mask_row](const Tensor& x) { return masked_fill(x, mask_row, -1.5); });
  add_single(table, "masked_fill/same_shape", {3, 4},
             [cond_full](const Tensor& x) { return masked_fill(x, cond_full, 2.0); });
  add_single(table, "masked_fill/transposed", {4, 3},
             [cond_full](const Tensor& x) { return masked_fill(transpose(x, 0, 1), cond_full, 0.0); });

  const std::vector<IntArgOp> triangles = {{"tril", [](const Tensor& x, int64_t k) { return tril(x, k); }},
                                           {"triu", [](const Tensor& x, int64_t k) { return triu(x, k); }}};
  const std::vector<IntArgLayout> diagonals = {
      {"square", {4, 4}, 0},
      {"above_diagonal", {4, 4}, 1},
      {"below_diagonal", {3, 5}, -1},
      {"batched", {2, 3, 4}, 0},
      {"transposed", {5, 3}, 0, [](const Tensor& x) { return transpose(x, 0, 1); }},
      {"zero_size", {0, 3, 3}, 0},
  };
  add_int_arg_cases(table, triangles, diagonals);
}

}  // namespace linea::gradcheck::cases
