#pragma once
// Building blocks of the gradient-check table (autograd/gradcheck_cases*.cpp): input draws that
// keep values away from kinks and singularities, the input layouts ("situations") an op is
// checked under, and the functions that append each family's rows.
//
// A layout changes what the op under test sees, not what gradcheck perturbs: the leaves stay
// contiguous and the layout's view (a transpose, a slice with step, an expand) is applied inside
// f, so the op receives a strided tensor and its backward must route gradients through the view.
#include <functional>
#include <string>
#include <vector>

#include "autograd/gradcheck_cases.h"
#include "autograd/ops.h"

namespace linea::gradcheck::cases {

using Table = std::vector<Case>;
using Make = std::function<std::vector<Tensor>(Generator& gen)>;
using Unary = std::function<Tensor(const Tensor&)>;
using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
// Draws one float64 input of a given shape.
using Draw = std::function<Tensor(const Shape& shape, Generator& gen)>;

// Appends a row; its op is the part of the name before the first '/'.
void add(Table& table, const std::string& name, Make make, Function f, Options options = {});
// A row of one input of `shape`: f(x) = fn(x).
void add_single(Table& table, const std::string& name, const Shape& shape, Unary fn, Draw draw = nullptr,
                Options options = {});

// ---- input draws ----
Draw normal(double scale = 1.0);
Draw in_range(double low, double high);  // uniform
// Normal values moved at least `margin` away from every point (kinks, clamp bounds, zero).
Draw away_from(std::vector<double> points, double margin = 0.05, double scale = 1.0);
// Normal values at least `gap` apart from each other, so max/min have one clear winner.
Draw distinct(double gap = 0.05);
// Two families of values that never come within 0.05 of each other, yet each wins about half of
// the comparisons: draws with low = true sit in [k + 0.05, k + 0.45) / 2 for integers k, the
// others in [k + 0.55, k + 0.95) / 2. For maximum/minimum under any broadcasting.
Draw interleaved(bool low);

// Inputs of the given shapes, drawn in order, each with its own draw (or one draw for all).
Make inputs(std::vector<Shape> shapes, Draw draw = normal());
Make inputs(std::vector<Shape> shapes, std::vector<Draw> draws);

// ---- constant (non-differentiable) operands that f captures ----
// Int64 values of `shape` (1-D when no shape is given).
Tensor index_tensor(std::vector<int64_t> values, Shape shape = {});
// A fixed Bool pattern with both values present (deterministic in `seed`).
Tensor bool_pattern(const Shape& shape, uint64_t seed);

// ---- layouts ----
struct Layout {
  std::string name;
  Shape shape;  // the leaf's shape
  Unary view;   // applied inside f before the op under test
};
// For ops of any shape, all seeing a (3, 4)-like tensor where sizes allow: contiguous, transposed,
// sliced with step, expanded, zero-size (0, 3) and 0-dim.
std::vector<Layout> elementwise_layouts();
Tensor identity(const Tensor& x);

// Ops of one tensor and an integer (softmax's dim, tril's diagonal offset), each checked under
// layouts that bring their own integer: one row "<op>/<layout>" per pair, f(x) = fn(view(x), arg).
struct IntArgOp {
  std::string name;
  std::function<Tensor(const Tensor&, int64_t)> fn;
};
struct IntArgLayout {
  std::string name;
  Shape shape;  // the leaf's shape
  int64_t arg;
  Unary view = identity;
};
void add_int_arg_cases(Table& table, const std::vector<IntArgOp>& ops, const std::vector<IntArgLayout>& layouts,
                       Draw draw = nullptr);

// ---- the families of rows ----
void add_unary_cases(Table& table);        // gradcheck_cases_elementwise.cpp
void add_binary_cases(Table& table);       // gradcheck_cases_elementwise.cpp
void add_selection_cases(Table& table);    // gradcheck_cases_elementwise.cpp
void add_view_cases(Table& table);         // gradcheck_cases_structure.cpp
void add_reduction_cases(Table& table);    // gradcheck_cases_structure.cpp
void add_matmul_cases(Table& table);       // gradcheck_cases_structure.cpp
void add_softmax_cases(Table& table);      // gradcheck_cases_nn.cpp
void add_norm_cases(Table& table);         // gradcheck_cases_nn.cpp
void add_fused_linear_cases(Table& table);  // gradcheck_cases_nn.cpp
void add_indexing_cases(Table& table);     // gradcheck_cases_nn.cpp
void add_dropout_cases(Table& table);      // gradcheck_cases_nn.cpp
void add_attention_cases(Table& table);    // gradcheck_cases_attention.cpp
void add_rotary_cases(Table& table);       // gradcheck_cases_attention.cpp
void add_scan_cases(Table& table);         // gradcheck_cases_scan.cpp
void add_normalized_exp_cases(Table& table);  // gradcheck_cases_linear.cpp
void add_refined_gate_cases(Table& table);    // gradcheck_cases_linear.cpp

}  // namespace linea::gradcheck::cases
