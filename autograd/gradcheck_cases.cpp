// The gradient-check table: shared building blocks, and the table assembled from the families
// of rows in gradcheck_cases_{elementwise,structure,nn,attention,scan,linear}.cpp.
#include "autograd/gradcheck_cases.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/gradcheck_cases_build.h"

namespace linea::gradcheck {

namespace cases {

namespace {

// Applies fn to every value on the host: input draws are small, and plain loops say exactly
// which values come out.
Tensor map_values(const Tensor& x, const std::function<double(double)>& fn) {
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v) e = fn(e);
  return from_vector(v, x.shape());
}

}  // namespace

void add(Table& table, const std::string& name, Make make, Function f, Options options) {
  table.push_back(Case{name, name.substr(0, name.find('/')), std::move(make), std::move(f), options});
}

void add_single(Table& table, const std::string& name, const Shape& shape, Unary fn, Draw draw, Options options) {
  add(table, name, inputs({shape}, draw ? draw : normal()),
      [fn = std::move(fn)](const std::vector<Tensor>& x) { return fn(x[0]); }, options);
}

void add_int_arg_cases(Table& table, const std::vector<IntArgOp>& ops, const std::vector<IntArgLayout>& layouts,
                       Draw draw) {
  for (const IntArgOp& op : ops)
    for (const IntArgLayout& l : layouts)
      add_single(table, op.name + "/" + l.name, l.shape,
                 [fn = op.fn, l](const Tensor& x) { return fn(l.view(x), l.arg); }, draw);
}

Draw normal(double scale) {
  return [scale](const Shape& shape, Generator& gen) { return randn(shape, kFloat64, &gen) * scale; };
}

Draw in_range(double low, double high) {
  return [low, high](const Shape& shape, Generator& gen) { return uniform(shape, low, high, kFloat64, &gen); };
}

Draw away_from(std::vector<double> points, double margin, double scale) {
  return [points, margin, scale](const Shape& shape, Generator& gen) {
    return map_values(randn(shape, kFloat64, &gen) * scale, [&](double v) {
      for (double p : points)
        if (std::abs(v - p) < margin) v = v < p ? p - margin : p + margin;
      return v;
    });
  };
}

Draw distinct(double gap) {
  return [gap](const Shape& shape, Generator& gen) {
    std::vector<double> v = randn(shape, kFloat64, &gen).to_vector<double>();
    std::vector<size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    // Walking up the sorted values, lift each one that sits too close to the one below it.
    for (size_t i = 1; i < order.size(); ++i) v[order[i]] = std::max(v[order[i]], v[order[i - 1]] + gap);
    return from_vector(v, shape);
  };
}

Draw interleaved(bool low) {
  return [low](const Shape& shape, Generator& gen) {
    return map_values(randn(shape, kFloat64, &gen) * 2.0, [low](double v) {
      const double whole = std::floor(v), fraction = v - whole;
      return (whole + (low ? 0.05 : 0.55) + 0.4 * fraction) / 2.0;
    });
  };
}

Make inputs(std::vector<Shape> shapes, Draw draw) {
  return inputs(shapes, std::vector<Draw>(shapes.size(), draw));
}

Make inputs(std::vector<Shape> shapes, std::vector<Draw> draws) {
  return [shapes, draws](Generator& gen) {
    std::vector<Tensor> xs;
    for (size_t i = 0; i < shapes.size(); ++i) xs.push_back(draws[i](shapes[i], gen));
    return xs;
  };
}

Tensor index_tensor(std::vector<int64_t> values, Shape shape) {
  return from_vector(values, shape.empty() ? Shape{static_cast<int64_t>(values.size())} : shape);
}

Tensor bool_pattern(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  std::vector<double> v = randn(shape, kFloat64, &gen).to_vector<double>();
  std::vector<bool> mask;
  for (size_t i = 0; i < v.size(); ++i) mask.push_back(i == 0 || (i != 1 && v[i] > 0));  // both values present
  return from_vector(mask, shape);
}

Tensor identity(const Tensor& x) { return x; }

std::vector<Layout> elementwise_layouts() {
  return {
      {"contiguous", {3, 4}, identity},
      {"transposed", {4, 3}, [](const Tensor& x) { return transpose(x, 0, 1); }},
      {"sliced_step2", {3, 8}, [](const Tensor& x) { return slice(x, 1, 1, 8, 2); }},
      {"expanded", {3, 1}, [](const Tensor& x) { return expand(x, {2, 3, 4}); }},
      {"zero_size", {0, 3}, identity},
      {"scalar", {}, identity},
  };
}

}  // namespace cases

std::vector<Case> op_cases() {
  cases::Table table;
  cases::add_unary_cases(table);
  cases::add_binary_cases(table);
  cases::add_selection_cases(table);
  cases::add_view_cases(table);
  cases::add_reduction_cases(table);
  cases::add_matmul_cases(table);
  cases::add_softmax_cases(table);
  cases::add_norm_cases(table);
  cases::add_fused_linear_cases(table);
  cases::add_indexing_cases(table);
  cases::add_dropout_cases(table);
  cases::add_attention_cases(table);
  cases::add_rotary_cases(table);
  cases::add_scan_cases(table);
  cases::add_normalized_exp_cases(table);
  cases::add_refined_gate_cases(table);
  return table;
}

Result run_case(const Case& c, uint64_t seed) {
  Generator gen(seed);
  const std::vector<Tensor> inputs = c.make_inputs(gen);
  return check(c.f, inputs, c.options);
}

}  // namespace linea::gradcheck
