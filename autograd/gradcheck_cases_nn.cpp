// Rows for the ops networks are built from: softmax, log_softmax, cross_entropy, layer_norm,
// rms_norm, fused_linear, the indexing ops (index_select, gather, scatter_add, embedding) and dropout.
#include <optional>

#include "autograd/gradcheck_cases_build.h"

namespace linea::gradcheck::cases {

namespace {

using Xs = const std::vector<Tensor>&;

Tensor transposed(const Tensor& x) { return transpose(x, 0, 1); }

}  // namespace

void add_softmax_cases(Table& table) {
  const std::vector<IntArgOp> ops = {{"softmax", [](const Tensor& x, int64_t d) { return softmax(x, d); }},
                                     {"log_softmax", [](const Tensor& x, int64_t d) { return log_softmax(x, d); }}};
  const std::vector<IntArgLayout> layouts = {
      {"last_dim", {3, 5}, -1},
      {"first_dim", {3, 5}, 0},
      {"middle_dim", {2, 4, 3}, 1},
      {"transposed", {5, 3}, -1, transposed},
      {"sliced", {3, 10}, -1, [](const Tensor& x) { return slice(x, 1, 1, 10, 2); }},
      {"one_dim", {6}, 0},
      // exp(800) overflows: the kernel must subtract the row max first.
      {"large_logits", {3, 5}, -1, [](const Tensor& x) { return x + 800.0; }},
      {"zero_rows", {0, 5}, -1},
      {"scalar", {}, 0},
  };
  add_int_arg_cases(table, ops, layouts, normal(2.0));

  struct LossRow {
    std::string name;
    Shape logits;
    std::vector<int64_t> targets;
    Shape target_shape;
    int64_t ignore_index = -100;
    Reduction reduction = Reduction::Mean;
    Unary view = identity;
  };
  const std::vector<LossRow> losses = {
      {"mean", {4, 5}, {2, 0, 4, 1}, {4}},
      {"ignore_index_mean", {4, 5}, {2, -100, 4, -100}, {4}},
      {"custom_ignore_index", {4, 5}, {2, 3, 0, 3}, {4}, 3},
      {"ignore_index_sum", {4, 5}, {2, -100, 4, 1}, {4}, -100, Reduction::Sum},
      {"ignore_index_none", {4, 5}, {2, -100, 4, 1}, {4}, -100, Reduction::None},
      {"batched_3d", {2, 3, 4}, {0, 3, 3, 1, -100, 2}, {2, 3}},
      {"transposed_logits", {5, 4}, {1, 4, 0, 2}, {4}, -100, Reduction::Mean, transposed},
      {"one_class", {3, 1}, {0, 0, 0}, {3}},
      {"zero_rows_sum", {0, 5}, {}, {0}, -100, Reduction::Sum},
      {"zero_rows_none", {0, 5}, {}, {0}, -100, Reduction::None},
  };
  for (const LossRow& r : losses) {
    const Tensor targets = index_tensor(r.targets, r.target_shape);
    add_single(table, "cross_entropy/" + r.name, r.logits, [r, targets](const Tensor& x) {
      return cross_entropy(r.view(x), targets, r.ignore_index, r.reduction);
    }, normal(2.0));
  }
  // 640 logits: checked along random directions.
  std::vector<int64_t> many_targets;
  for (int64_t i = 0; i < 64; ++i) many_targets.push_back(i % 7 == 3 ? -100 : (i * 5) % 10);
  const Tensor large_targets = index_tensor(many_targets);
  add_single(table, "cross_entropy/large", {64, 10},
             [large_targets](const Tensor& x) { return cross_entropy(x, large_targets); });
}

void add_norm_cases(Table& table) {
  // Inputs are x, then weight and bias where the row has them (undefined tensors otherwise).
  // rms_norm, which has no bias, runs the rows that are not about the bias, with the weight only.
  struct Row {
    std::string name;
    Shape x;
    bool weight, bias;
    bool rms = true;
    Unary view = identity;
    double eps = 1e-5;
  };
  const std::vector<Row> rows = {
      {"weight_bias", {4, 5}, true, true, false},
      {"no_affine", {4, 5}, false, false},
      {"weight_only", {4, 5}, true, false},
      {"bias_only", {4, 5}, false, true, false},
      {"batched_3d", {2, 3, 5}, true, true},
      {"transposed_input", {5, 4}, true, true, true, transposed},
      {"large_eps", {4, 5}, true, true, true, identity, 0.5},
      {"zero_rows", {0, 5}, true, true},
      {"large", {40, 30}, true, true},
  };
  for (const Row& r : rows) {
    const int64_t c = r.view(zeros(r.x)).size(-1);  // the normalized size, as the op sees x
    std::vector<Shape> shapes = {r.x};
    if (r.weight) shapes.push_back({c});
    if (r.bias) shapes.push_back({c});
    // Unpacks the inputs in order into x, weight and (for layer_norm) bias.
    auto parts = [r](Xs x, bool with_bias) {
      size_t next = 1;
      const Tensor w = r.weight ? x[next++] : Tensor();
      const Tensor b = r.bias && with_bias ? x[next++] : Tensor();
      return std::make_tuple(r.view(x[0]), w, b);
    };
    add(table, "layer_norm/" + r.name, inputs(shapes), [parts, eps = r.eps](Xs x) {
      auto [xv, w, b] = parts(x, true);
      return layer_norm(xv, w, b, eps);
    });
    if (!r.rms) continue;
    std::vector<Shape> rms_shapes = {r.x};
    if (r.weight) rms_shapes.push_back({c});
    add(table, "rms_norm/" + r.name, inputs(rms_shapes), [parts, eps = r.eps](Xs x) {
      auto [xv, w, b] = parts(x, false);
      return rms_norm(xv, w, eps);
    });
  }
  // A pre-norm block's residual stream: x feeds the norm and an addition made after it, whose
  // gradient for x is waiting when the norm's backward runs and is added in there
  // (autograd/node.h: record_adding). With the addition made first, the norm runs first and the
  // engine adds the two.
  add(table, "rms_norm/residual_stream", inputs({{4, 6}, {6}}),
      [](Xs x) { return rms_norm(x[0], x[1], 1e-5) * 2.0 + x[0]; });
  add(table, "layer_norm/residual_stream", inputs({{4, 6}, {6}, {6}}),
      [](Xs x) { return layer_norm(x[0], x[1], x[2], 1e-5) + x[0] * 0.5; });
  add(table, "layer_norm/residual_stream_made_first", inputs({{4, 6}, {6}, {6}}),
      [](Xs x) { return x[0] * 0.5 + layer_norm(x[0], x[1], x[2], 1e-5); });
}

void add_fused_linear_cases(Table& table) {
  // Under grad mode fused_linear records its composite ops; these rows check that what it
  // records is the function the contract states, with every optional part. Inputs: x (3, 5),
  // weight (4, 5), then bias, up weight, up bias, norm weight, norm bias, residual as each row
  // has them. The activations checked (gelu, its tanh form, silu) are smooth.
  struct Row {
    std::string name;
    RowNorm norm;
    bool bias, gated, norm_bias, residual;
    std::optional<UnaryOp> activation;
  };
  const std::vector<Row> rows = {
      {"plain", RowNorm::None, false, false, false, false, std::nullopt},
      {"bias_residual", RowNorm::None, true, false, false, true, std::nullopt},
      {"rms_swiglu_residual", RowNorm::RMS, true, true, false, true, UnaryOp::Silu},
      {"layer_norm_gelu", RowNorm::Layer, true, false, true, false, UnaryOp::GeluErf},
      {"rms_gelu_tanh_gated", RowNorm::RMS, false, true, false, false, UnaryOp::GeluTanh},
  };
  for (const Row& r : rows) {
    std::vector<Shape> shapes = {{3, 5}, {4, 5}};
    if (r.bias) shapes.push_back({4});
    if (r.gated) shapes.insert(shapes.end(), {{4, 5}, {4}});
    if (r.norm != RowNorm::None) shapes.push_back({5});
    if (r.norm_bias) shapes.push_back({5});
    if (r.residual) shapes.push_back({3, 4});
    add(table, "fused_linear/" + r.name, inputs(shapes), [r](Xs x) {
      size_t next = 2;
      FusedLinearInputs in{.x = x[0], .weight = x[1]};
      if (r.bias) in.bias = x[next++];
      if (r.gated) {
        in.up_weight = x[next++];
        in.up_bias = x[next++];
      }
      if (r.norm != RowNorm::None) in.norm_weight = x[next++];
      if (r.norm_bias) in.norm_bias = x[next++];
      if (r.residual) in.residual = x[next++];
      const FusedLinearOptions options{.norm = r.norm,
                                       .norm_eps = 1e-5,
                                       .activate = r.activation.has_value(),
                                       .activation = r.activation.value_or(UnaryOp::GeluErf)};
      return fused_linear(in, options);
    });
  }
}

void add_indexing_cases(Table& table) {
  // x is read from (or scattered into) along dim at the index's positions; index_select takes a
  // 1-D index (index_shape empty), gather and scatter_add one with x's rank (src has its shape).
  struct IndexRow {
    std::string name;
    Shape x;
    int64_t dim;
    std::vector<int64_t> index;
    Shape index_shape = {};
    Unary view = identity;
  };
  const std::vector<IndexRow> selects = {
      {"dim0_repeated", {5, 3}, 0, {0, 3, 3, 1}},
      {"dim1", {3, 5}, 1, {4, 0, 2}},
      {"middle_dim", {2, 4, 3}, 1, {3, 0}},
      {"transposed", {5, 3}, 1, {1, 1, 4}, {}, transposed},
      {"empty_index", {5, 3}, 0, {}},
  };
  for (const IndexRow& r : selects) {
    const Tensor index = index_tensor(r.index);
    add_single(table, "index_select/" + r.name, r.x,
               [r, index](const Tensor& x) { return index_select(r.view(x), r.dim, index); });
  }
  const std::vector<IndexRow> scatters = {
      {"dim1_repeated", {3, 4}, 1, {0, 3, 2, 2, 1, 0}, {3, 2}},
      {"dim0", {3, 4}, 0, {2, 0, 1, 1, 0, 0, 2, 1}, {2, 4}},
      {"smaller_index", {3, 4}, 1, {3, 1, 0, 0}, {2, 2}},
      {"negative_dim", {2, 3, 4}, -1, {0, 3, 1, 1, 2, 0}, {1, 3, 2}},
      {"transposed", {4, 3}, 1, {3, 0, 1, 1, 2, 3}, {3, 2}, transposed},
  };
  for (const IndexRow& r : scatters) {
    const Tensor index = index_tensor(r.index, r.index_shape);
    add_single(table, "gather/" + r.name, r.x, [r, index](const Tensor& x) { return gather(r.view(x), r.dim, index); });
    add(table, "scatter_add/" + r.name, inputs({r.x, r.index_shape}),
        [r, index](Xs x) { return scatter_add(r.view(x[0]), r.dim, index, x[1]); });
  }
  const Tensor src_index = index_tensor({4, 0, 2, 2, 1, 4}, {3, 2});
  add(table, "scatter_add/transposed_src", inputs({{3, 5}, {2, 3}}),
      [src_index](Xs x) { return scatter_add(x[0], 1, src_index, transposed(x[1])); });

  struct EmbeddingRow {
    std::string name;
    std::vector<int64_t> ids;
    Shape ids_shape;
    Unary view = identity;
    Shape weight = {6, 3};
  };
  const std::vector<EmbeddingRow> embeddings = {
      {"repeated_ids", {1, 4, 1, 0, 5, 1}, {2, 3}},
      {"one_dim_ids", {2, 2, 2}, {3}},
      {"scalar_id", {4}, {}},
      {"transposed_weight", {0, 5, 5, 2}, {4}, transposed, {3, 6}},
      {"empty_ids", {}, {0}},
  };
  for (const EmbeddingRow& r : embeddings) {
    const Tensor ids = from_vector(r.ids, r.ids_shape);
    add_single(table, "embedding/" + r.name, r.weight, [r, ids](const Tensor& w) { return embedding(r.view(w), ids); });
  }
}

void add_dropout_cases(Table& table) {
  struct Row {
    std::string name;
    Shape shape;
    double p;
    bool training = true;
    Unary view = identity;
  };
  const std::vector<Row> rows = {
      {"train", {4, 5}, 0.3},
      {"train_high_p", {4, 5}, 0.8},
      {"eval", {4, 5}, 0.3, false},
      {"p_zero", {4, 5}, 0.0},
      {"p_one", {4, 5}, 1.0},
      {"transposed", {5, 4}, 0.5, true, transposed},
      {"large", {50, 40}, 0.25},
  };
  for (const Row& r : rows)
    add_single(table, "dropout/" + r.name, r.shape, [r](const Tensor& x) {
      // A fresh generator per call: every finite-difference evaluation draws the same mask.
      Generator gen(7);
      return dropout(r.view(x), r.p, r.training, &gen);
    });
}

}  // namespace linea::gradcheck::cases
