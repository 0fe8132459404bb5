// Rows for the ops that move, combine and reduce values: views and copies, cat/stack/split/chunk,
// reductions, cumulative sums, sum_to, and matmul in every operand arrangement.
#include "autograd/gradcheck_cases_build.h"

namespace linea::gradcheck::cases {

namespace {

Tensor transposed(const Tensor& x) { return transpose(x, 0, 1); }

struct SingleRow {
  std::string name;
  Shape shape;
  Unary fn;
};

void add_rows(Table& table, const std::vector<SingleRow>& rows) {
  for (const SingleRow& r : rows) add_single(table, r.name, r.shape, r.fn);
}

void add_single_views(Table& table) {
  add_rows(table, {
      {"view/split_dim", {3, 4}, [](const Tensor& x) { return view(x, {2, 6}); }},
      {"view/infer_size", {2, 3, 4}, [](const Tensor& x) { return view(x, {4, -1}); }},
      {"view/narrowed_rows", {4, 6}, [](const Tensor& x) { return view(narrow(x, 0, 1, 2), {12}); }},
      {"view/zero_size", {0, 3}, [](const Tensor& x) { return view(x, {3, 0}); }},
      {"reshape/contiguous", {2, 3, 4}, [](const Tensor& x) { return reshape(x, {6, 4}); }},
      {"reshape/transposed_copy", {3, 4}, [](const Tensor& x) { return reshape(transposed(x), {12}); }},
      {"reshape/to_scalar", {1, 1}, [](const Tensor& x) { return reshape(x, {}); }},
      {"permute/3d", {2, 3, 4}, [](const Tensor& x) { return permute(x, {2, 0, 1}); }},
      {"permute/negative_dims", {2, 3, 4}, [](const Tensor& x) { return permute(x, {-1, -3, -2}); }},
      {"permute/sliced", {2, 6, 4}, [](const Tensor& x) { return permute(slice(x, 1, 0, 6, 2), {1, 2, 0}); }},
      {"transpose/last_two", {2, 3, 4}, [](const Tensor& x) { return transpose(x, -1, -2); }},
      {"transpose/outer", {2, 3, 4}, [](const Tensor& x) { return transpose(x, 0, 2); }},
      {"t/matrix", {3, 4}, [](const Tensor& x) { return t(x); }},
      {"narrow/middle", {4, 5}, [](const Tensor& x) { return narrow(x, 1, 1, 3); }},
      {"narrow/negative_start", {4, 5}, [](const Tensor& x) { return narrow(x, 0, -2, 2); }},
      {"narrow/empty", {4, 5}, [](const Tensor& x) { return narrow(x, 1, 2, 0); }},
      {"slice/step2", {5, 6}, [](const Tensor& x) { return slice(x, 1, 0, 6, 2); }},
      {"slice/step3_negative_start", {7, 3}, [](const Tensor& x) { return slice(x, 0, -6, 7, 3); }},
      {"slice/end_clamped", {4, 3}, [](const Tensor& x) { return slice(x, 0, 1, 100); }},
      {"slice/empty_range", {4, 3}, [](const Tensor& x) { return slice(x, 0, 3, 1); }},
      {"slice/of_transposed", {4, 6}, [](const Tensor& x) { return slice(transposed(x), 0, 1, 6, 2); }},
      {"select/first_dim", {3, 4}, [](const Tensor& x) { return select(x, 0, 1); }},
      {"select/negative_index", {3, 4, 2}, [](const Tensor& x) { return select(x, 1, -1); }},
      {"select/to_scalar", {4}, [](const Tensor& x) { return select(x, 0, 2); }},
      {"expand/new_dims", {3, 1}, [](const Tensor& x) { return expand(x, {2, 3, 4}); }},
      {"expand/keep_size", {3, 1}, [](const Tensor& x) { return expand(x, {-1, 5}); }},
      {"expand/scalar", {}, [](const Tensor& x) { return expand(x, {2, 3}); }},
      {"expand/of_transposed", {1, 3}, [](const Tensor& x) { return expand(transposed(x), {3, 4}); }},
      {"squeeze/all", {1, 3, 1, 2}, [](const Tensor& x) { return squeeze(x); }},
      {"squeeze/dim", {3, 1, 2}, [](const Tensor& x) { return squeeze(x, 1); }},
      {"squeeze/non_unit_dim_kept", {3, 2}, [](const Tensor& x) { return squeeze(x, 0); }},
      {"unsqueeze/front", {3, 4}, [](const Tensor& x) { return unsqueeze(x, 0); }},
      {"unsqueeze/negative", {3, 4}, [](const Tensor& x) { return unsqueeze(x, -1); }},
      {"unsqueeze/transposed", {3, 4}, [](const Tensor& x) { return unsqueeze(transposed(x), 1); }},
      {"flatten/all", {2, 3, 4}, [](const Tensor& x) { return flatten(x); }},
      {"flatten/middle", {2, 3, 4, 2}, [](const Tensor& x) { return flatten(x, 1, 2); }},
      {"flatten/transposed", {3, 4}, [](const Tensor& x) { return flatten(transposed(x)); }},
      {"flatten/scalar", {}, [](const Tensor& x) { return flatten(x); }},
      {"contiguous/transposed", {3, 4}, [](const Tensor& x) { return contiguous(transposed(x)); }},
      {"contiguous/already", {3, 4}, [](const Tensor& x) { return contiguous(x); }},
      {"clone/plain", {3, 4}, [](const Tensor& x) { return clone(x); }},
      {"clone/strided", {3, 8}, [](const Tensor& x) { return clone(slice(x, 1, 0, 8, 2)); }},
      {"to/float64_identity", {3, 4}, [](const Tensor& x) { return to(x, kFloat64); }},
      {"to/cpu_device", {3, 4}, [](const Tensor& x) { return to(transposed(x), kCPU); }},
  });
  // Through float32 and back: the derivative is 1, but each evaluation is rounded to float32
  // (relative 6e-8), so the finite difference needs a step of 1e-2 to stay within 1e-4 (the
  // function is linear: a large step costs no truncation error).
  Options rounded;
  rounded.eps = 1e-2;
  rounded.tolerance = 1e-4;
  add_single(table, "to/float32_roundtrip", {3, 4}, [](const Tensor& x) { return to(to(x, kFloat32), kFloat64); },
             normal(), rounded);
}

// Puts split pieces back together in reverse order, each scaled differently, so a gradient routed
// to the wrong piece or the wrong offset shows.
Tensor reassemble(const std::vector<Tensor>& pieces, int64_t dim) {
  std::vector<Tensor> scaled;
  for (size_t i = pieces.size(); i-- > 0;) scaled.push_back(pieces[i] * static_cast<double>(i + 1));
  return cat(scaled, dim);
}

void add_combining_views(Table& table) {
  using Xs = const std::vector<Tensor>&;
  add(table, "cat/dim0", inputs({{2, 3}, {1, 3}, {3, 3}}), [](Xs x) { return cat(x, 0); });
  add(table, "cat/dim1", inputs({{2, 1}, {2, 4}}), [](Xs x) { return cat(x, 1); });
  add(table, "cat/negative_dim", inputs({{2, 3, 1}, {2, 3, 2}}), [](Xs x) { return cat(x, -1); });
  add(table, "cat/with_empty", inputs({{2, 3}, {0, 3}, {1, 3}}), [](Xs x) { return cat(x, 0); });
  add(table, "cat/strided", inputs({{3, 2}, {2, 6}}),
      [](Xs x) { return cat({transposed(x[0]), slice(x[1], 1, 0, 6, 2)}, 0); });
  add(table, "cat/single", inputs({{2, 3}}), [](Xs x) { return cat(x, 1); });
  add(table, "cat/same_input_twice", inputs({{2, 3}}), [](Xs x) { return cat({x[0], x[0] * 2.0}, 0); });
  add(table, "stack/dim0", inputs({{3, 4}, {3, 4}, {3, 4}}), [](Xs x) { return stack(x, 0); });
  add(table, "stack/last_dim", inputs({{3, 4}, {3, 4}}), [](Xs x) { return stack(x, -1); });
  add(table, "stack/strided", inputs({{4, 3}, {3, 4}}), [](Xs x) { return stack({transposed(x[0]), x[1]}, 1); });

  add_rows(table, {
      {"split/equal", {6, 4}, [](const Tensor& x) { return reassemble(split(x, 2, 0), 0); }},
      {"split/remainder", {7, 3}, [](const Tensor& x) { return reassemble(split(x, 3, 0), 0); }},
      {"split/sizes_with_empty", {2, 9}, [](const Tensor& x) { return reassemble(split(x, {2, 0, 4, 3}, 1), 1); }},
      {"split/transposed", {5, 4}, [](const Tensor& x) { return reassemble(split(transposed(x), 2, 1), 1); }},
      // One node for all pieces: a piece no gradient reaches gets zeros in its place, and a piece
      // used twice gets both gradients.
      {"split/some_pieces_unused", {3, 9},
       [](const Tensor& x) {
         const std::vector<Tensor> p = split(x, {2, 3, 4}, 1);
         return cat({p[2] * 3.0, p[0]}, 1);
       }},
      {"split/piece_used_twice", {4, 6},
       [](const Tensor& x) {
         const std::vector<Tensor> p = split(x, {1, 2, 3}, 1);
         return cat({p[1] * p[1], p[2], p[1] * -2.0}, 1);
       }},
      {"chunk/even", {6, 2}, [](const Tensor& x) { return reassemble(chunk(x, 3, 0), 0); }},
      {"chunk/uneven", {2, 7}, [](const Tensor& x) { return reassemble(chunk(x, 3, 1), 1); }},
      {"chunk/more_chunks_than_rows", {2, 2}, [](const Tensor& x) { return reassemble(chunk(x, 4, 0), 0); }},
  });
}

// ---- reductions ----

using Reduction = std::function<Tensor(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim)>;

struct ReductionOp {
  std::string name;
  Reduction fn;
  Draw draw;
};

struct ReductionLayout {
  std::string name;
  Shape shape;
  std::vector<int64_t> dims;
  bool keepdim;
  Unary view;
};

std::vector<ReductionLayout> reduction_layouts() {
  return {
      {"all", {2, 3, 4}, {}, false, identity},
      {"middle_dim", {2, 3, 4}, {1}, false, identity},
      {"outer_dims_keepdim", {2, 3, 4}, {0, 2}, true, identity},
      {"leading_dims", {2, 3, 4}, {0, 1}, false, identity},
      {"negative_dim", {2, 3, 4}, {-1}, false, identity},
      {"transposed", {4, 3}, {0}, false, transposed},
      // Duplicates of one leaf value: amax/amin split the gradient over the tie, and expand's
      // backward sums the shares back to 1, as the finite difference sees it.
      {"expanded", {3, 1}, {1}, false, [](const Tensor& x) { return expand(x, {3, 5}); }},
      {"scalar", {}, {}, false, identity},
      {"zero_size_rows", {0, 3}, {1}, false, identity},
  };
}

void add_reductions(Table& table) {
  const std::vector<ReductionOp> ops = {
      {"sum", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return sum(x, d, k); }, normal()},
      {"mean", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return mean(x, d, k); }, normal()},
      {"amax", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return amax(x, d, k); }, distinct()},
      {"amin", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return amin(x, d, k); }, distinct()},
      {"logsumexp", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return logsumexp(x, d, k); },
       normal(2.0)},
      {"var", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return var(x, d, 1, k); }, normal()},
  };
  for (const ReductionOp& op : ops)
    for (const ReductionLayout& l : reduction_layouts()) {
      // A variance over one element divides by n - 1 = 0.
      if (op.name == "var" && l.name == "scalar") continue;
      add_single(table, op.name + "/" + l.name, l.shape,
                 [fn = op.fn, l](const Tensor& x) { return fn(l.view(x), l.dims, l.keepdim); }, op.draw);
    }

  add_rows(table, {
      {"sum/zero_size_reduced", {0, 3}, [](const Tensor& x) { return sum(x, {0}); }},
      {"max/all", {3, 4}, [](const Tensor& x) { return max(x); }},
      {"min/all", {3, 4}, [](const Tensor& x) { return min(x); }},
      // exp(1000) overflows a double: only the max shift keeps this finite.
      {"logsumexp/large_values", {3, 4}, [](const Tensor& x) { return logsumexp(x + 1000.0, {1}); }},
      {"var/population", {2, 3, 4}, [](const Tensor& x) { return var(x, {1}, 0); }},
      {"var/correction_2_keepdim", {2, 5}, [](const Tensor& x) { return var(x, {1}, 2, true); }},
  });
  // Large enough for the multi-threaded whole-tensor and column-sum kernels; checked along
  // random directions.
  add_single(table, "sum/large_threaded", {400, 500}, [](const Tensor& x) { return sum(x); });
  add_single(table, "sum/large_columns", {500, 400}, [](const Tensor& x) { return sum(x, {0}); });
  add_single(table, "mean/large_rows", {300, 700}, [](const Tensor& x) { return mean(x, {1}); });
}

void add_cumsum_and_sum_to(Table& table) {
  for (bool reverse : {false, true})
    for (int64_t dim : {0, 1, 2, -1}) {
      const std::string name = "cumsum/" + std::string(reverse ? "reverse_" : "forward_") + "dim" +
                               (dim < 0 ? "_minus" + std::to_string(-dim) : std::to_string(dim));
      add_single(table, name, {2, 3, 4}, [dim, reverse](const Tensor& x) { return cumsum(x, dim, reverse); });
    }
  // With a `before` (decoding's carried max): both inputs get gradients.
  for (int64_t n : {1, 6})
    add(table, "previous_minus/with_before_" + std::to_string(n), inputs({{2, 3, n, 1}, {2, 3, 1, 1}}),
        [](const std::vector<Tensor>& x) { return previous_minus(x[0], 2, x[1]); });
  add(table, "previous_minus/with_before_zero_length", inputs({{2, 0, 3}, {2, 1, 3}}),
      [](const std::vector<Tensor>& x) { return previous_minus(x[0], 1, x[1]); });
  add_rows(table, {
      {"cumsum/transposed", {4, 3}, [](const Tensor& x) { return cumsum(transposed(x), 1); }},
      {"cumsum/reverse_sliced", {3, 8}, [](const Tensor& x) { return cumsum(slice(x, 1, 0, 8, 2), 1, true); }},
      {"cumsum/scalar", {}, [](const Tensor& x) { return cumsum(x, 0); }},
      {"cumsum/zero_size", {0, 3}, [](const Tensor& x) { return cumsum(x, 1); }},
      {"previous_minus/dim2", {2, 3, 5, 1}, [](const Tensor& x) { return previous_minus(x, 2); }},
      {"previous_minus/last_dim", {3, 4}, [](const Tensor& x) { return previous_minus(x, -1); }},
      {"previous_minus/one_position", {3, 1}, [](const Tensor& x) { return previous_minus(x, 1); }},
      {"previous_minus/transposed", {4, 3}, [](const Tensor& x) { return previous_minus(transposed(x), 1); }},
      {"previous_minus/zero_size", {0, 3}, [](const Tensor& x) { return previous_minus(x, 1); }},
      {"sum_to/trailing", {2, 3, 4}, [](const Tensor& x) { return sum_to(x, {3, 1}); }},
      {"sum_to/row", {2, 3, 4}, [](const Tensor& x) { return sum_to(x, {1, 4}); }},
      {"sum_to/keep_rank", {2, 3, 4}, [](const Tensor& x) { return sum_to(x, {2, 1, 4}); }},
      {"sum_to/scalar", {2, 3}, [](const Tensor& x) { return sum_to(x, {}); }},
      {"sum_to/same_shape", {3, 4}, [](const Tensor& x) { return sum_to(x, {3, 4}); }},
      {"sum_to/transposed", {4, 3}, [](const Tensor& x) { return sum_to(transposed(x), {3, 1}); }},
  });
}

}  // namespace

void add_view_cases(Table& table) {
  add_single_views(table);
  add_combining_views(table);
}

void add_reduction_cases(Table& table) {
  add_reductions(table);
  add_cumsum_and_sum_to(table);
}

void add_matmul_cases(Table& table) {
  struct Row {
    std::string name;
    Shape a, b;
    Unary view_a = identity, view_b = identity;
  };
  const Unary last_two = [](const Tensor& x) { return transpose(x, -1, -2); };
  const std::vector<Row> rows = {
      {"2d", {3, 4}, {4, 5}},
      {"batched", {2, 3, 4}, {2, 4, 5}},
      {"batch_broadcast", {2, 1, 3, 4}, {5, 4, 2}},
      {"unit_batch_broadcast", {1, 3, 4}, {2, 4, 5}},
      {"shared_b", {2, 3, 4}, {4, 5}},
      {"shared_a", {3, 4}, {2, 4, 5}},
      {"vector_matrix", {4}, {4, 5}},
      {"matrix_vector", {3, 4}, {4}},
      {"vector_vector", {4}, {4}},
      {"batched_matrix_vector", {2, 3, 4}, {4}},
      {"vector_batched_matrix", {4}, {2, 4, 3}},
      {"transposed_a", {4, 3}, {4, 5}, last_two},
      {"transposed_b", {3, 4}, {5, 4}, identity, last_two},
      {"transposed_both", {4, 3}, {5, 4}, last_two, last_two},
      {"batched_transposed_both", {2, 4, 3}, {2, 5, 4}, last_two, last_two},
      {"shared_b_transposed", {2, 3, 4}, {5, 4}, identity, last_two},
      {"sliced_operands", {3, 8}, {8, 5}, [](const Tensor& x) { return slice(x, 1, 0, 8, 2); },
       [](const Tensor& x) { return slice(x, 0, 1, 8, 2); }},
      {"expanded_batch", {3, 4}, {2, 4, 5}, [](const Tensor& x) { return expand(x, {2, 3, 4}); }},
      {"broadcast_row_shared_b", {4}, {4, 5}, [](const Tensor& x) { return expand(x, {3, 1, 4}); }},
      {"inner_size_zero", {3, 0}, {0, 4}},
      {"zero_batch", {0, 3, 4}, {4, 2}},
      {"zero_rows", {0, 4}, {4, 3}},
      {"large", {30, 40}, {40, 20}},
  };
  for (const Row& r : rows)
    add(table, "matmul/" + r.name, inputs({r.a, r.b}),
        [va = r.view_a, vb = r.view_b](const std::vector<Tensor>& x) { return matmul(va(x[0]), vb(x[1])); });
}

}  // namespace linea::gradcheck::cases
