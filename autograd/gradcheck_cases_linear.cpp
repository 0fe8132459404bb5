// Rows for the fused ops that build the linear attention layers' inputs: ReGLA's normalized exp
// feature map (each token's max for queries, the running max for keys, with and without a
// previous running max, which wins the first positions or never) and its refined gate (the floor
// active and not, no floor, extreme pre-activations); strided (heads-last, transposed-feature)
// and empty inputs, one position, one feature.
//
// The maps' inputs are drawn `distinct`, so every max has one clear winner (a tie is a kink);
// a previous running max is drawn apart from them.
#include <limits>

#include "autograd/gradcheck_cases_build.h"

namespace linea::gradcheck::cases {

void add_normalized_exp_cases(Table& table) {
  using enum NormalizedExpMode;
  enum class Previous { None, WinsFirst, Loses };
  enum class Layout { Plain, HeadsLast, FeaturesStrided };  // leaves (B,H,T,d), (B,T,H,d), (B,H,d,T)
  struct Row {
    std::string name;
    int64_t B, H, T, d;
    NormalizedExpMode mode;
    double scale = 1.0;
    Previous previous = Previous::None;
    Layout layout = Layout::Plain;
  };
  const std::vector<Row> rows = {
      {"row_max", 2, 2, 3, 4, RowMax, 0.7},
      {"row_max_heads_last", 2, 2, 3, 5, RowMax, 1.3, Previous::None, Layout::HeadsLast},
      {"row_max_features_strided", 1, 2, 4, 3, RowMax, 1.0, Previous::None, Layout::FeaturesStrided},
      {"row_max_one_feature", 1, 2, 3, 1, RowMax},
      {"prefix", 2, 2, 5, 3, PrefixMax},
      {"prefix_scaled", 1, 2, 6, 2, PrefixMax, 2.5},
      {"prefix_previous_wins_first", 1, 2, 6, 3, PrefixMax, 1.0, Previous::WinsFirst},
      {"prefix_previous_loses", 2, 1, 4, 3, PrefixMax, 1.0, Previous::Loses},
      {"prefix_heads_last", 2, 2, 5, 4, PrefixMax, 0.8, Previous::WinsFirst, Layout::HeadsLast},
      {"prefix_features_strided", 1, 2, 5, 3, PrefixMax, 1.0, Previous::None, Layout::FeaturesStrided},
      {"prefix_one_position", 2, 2, 1, 4, PrefixMax},
      {"prefix_one_position_previous", 2, 3, 1, 3, PrefixMax, 1.0, Previous::WinsFirst},
      {"prefix_one_feature", 1, 2, 7, 1, PrefixMax, 1.0, Previous::WinsFirst},
      {"prefix_zero_positions", 2, 2, 0, 3, PrefixMax, 1.0, Previous::WinsFirst},
      {"row_max_zero_batch", 0, 2, 3, 3, RowMax},
  };
  for (const Row& r : rows) {
    const Shape leaf = r.layout == Layout::HeadsLast         ? Shape{r.B, r.T, r.H, r.d}
                       : r.layout == Layout::FeaturesStrided ? Shape{r.B, r.H, r.d, r.T}
                                                             : Shape{r.B, r.H, r.T, r.d};
    std::vector<Shape> shapes = {leaf};
    std::vector<Draw> draws = {distinct()};
    if (r.previous != Previous::None) {
      // x is about N(0, 1), spread apart by `distinct`: 1.2 beats most early rows' maxima and
      // loses to a later one; -9 loses to every row.
      shapes.push_back({r.B, r.H, 1, 1});
      draws.push_back(r.previous == Previous::WinsFirst ? in_range(1.1, 1.3) : in_range(-9.5, -9.0));
    }
    add(table, "normalized_exp/" + r.name, inputs(shapes, draws), [r](const std::vector<Tensor>& x) {
      const Tensor seen = r.layout == Layout::HeadsLast         ? transpose(x[0], 1, 2)
                          : r.layout == Layout::FeaturesStrided ? transpose(x[0], 2, 3)
                                                                : x[0];
      const NormalizedExp out = normalized_exp(seen, r.mode, r.scale, x.size() > 1 ? x[1] : Tensor());
      return cat({flatten(out.features), flatten(out.max)}, 0);
    });
  }
}

void add_refined_gate_cases(Table& table) {
  const double none = -std::numeric_limits<double>::infinity();
  // Finite differences of a function of size ~1e4 lose digits to rounding at eps = 1e-6.
  Options extreme;
  extreme.eps = 1e-3;
  struct Row {
    std::string name;
    Shape shape;
    double floor;
    Draw draw;
    Unary view_a = identity, view_c = identity;
    Options options = {};
  };
  const std::vector<Row> rows = {
      {"floor_inactive", {2, 3, 4}, -20.0, normal(2.0)},
      // log f = log g + log u is below -2.5 for about a third of these draws.
      {"floor_active", {3, 8}, -2.5, normal(3.0)},
      {"no_floor", {2, 5}, none, normal(4.0)},
      // |a|, |c| up to ~1e4: every term stays finite, the floored ones have no gradient.
      {"extreme", {4, 6}, none, normal(3000.0), identity, identity, extreme},
      {"extreme_floored", {4, 6}, -20.0, normal(3000.0), identity, identity, extreme},
      // (B, T, H, dv) projections seen as (B, H, T, dv), as the ReGLA gate hands them over.
      {"heads_last", {2, 3, 2, 4}, -20.0, normal(2.0), [](const Tensor& a) { return transpose(a, 1, 2); },
       [](const Tensor& c) { return transpose(c, 1, 2); }},
      {"zero_size", {0, 3}, -20.0, normal()},
  };
  for (const Row& r : rows)
    add(table, "refined_log_gate/" + r.name, inputs({r.shape, r.shape}, r.draw),
        [r](const std::vector<Tensor>& x) { return refined_log_gate(r.view_a(x[0]), r.view_c(x[1]), r.floor); },
        r.options);
  // c read through a slice with a step (the op takes any strides).
  add(table, "refined_log_gate/sliced", inputs({{3, 4}, {3, 8}}, normal(2.0)), [](const std::vector<Tensor>& x) {
    return refined_log_gate(x[0], slice(x[1], 1, 1, 8, 2), -20.0);
  });
  // With the projections' biases, as the ReGLA gate passes them: (H, 1, dv) against (B, H, T, dv)
  // seen from (B, T, H, dv), and a bias on one side only.
  add(table, "refined_log_gate/head_biases", inputs({{2, 3, 2, 4}, {2, 3, 2, 4}, {2, 1, 4}, {2, 1, 4}}, normal(2.0)),
      [](const std::vector<Tensor>& x) {
        return refined_log_gate(transpose(x[0], 1, 2), transpose(x[1], 1, 2), -2.5, x[2], x[3]);
      });
  add(table, "refined_log_gate/forget_bias_only", inputs({{3, 5}, {3, 5}, {5}}, normal(2.0)),
      [none](const std::vector<Tensor>& x) { return refined_log_gate(x[0], x[1], none, x[2]); });
}

}  // namespace linea::gradcheck::cases
