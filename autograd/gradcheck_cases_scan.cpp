// Rows for the fused gated linear scan: every layout of the decays (none, one per step, per
// channel; on the key side, the value side, both), an initial state, the final state as an
// output, one step, sequences that cross the backward's chunk boundary, decays near the gate floor
// (-20, where exp is ~2e-9) and near 0, strided inputs and empty ones.
#include "autograd/gradcheck_cases_build.h"

namespace linea::gradcheck::cases {

void add_scan_cases(Table& table) {
  struct Row {
    std::string name;
    int64_t B, H, T, dk, dv;
    int64_t gk_width = 0, gv_width = 0;  // 0: no decay; 1: one per step; dk / dv: per channel
    bool initial_state = false;
    bool with_state = false;  // check S_T too (gated_linear_scan_with_state)
    bool heads_last = false;  // leaves (B, T, H, d), transposed to (B, H, T, d) inside f
    Draw decay = in_range(-1.5, -0.01);
  };
  const std::vector<Row> rows = {
      {"no_decay", 1, 2, 4, 3, 2},
      {"scalar_key", 1, 2, 4, 3, 2, 1, 0},
      {"key", 2, 1, 4, 3, 2, 3, 0},
      {"scalar_value", 1, 2, 4, 3, 2, 0, 1},
      {"value", 2, 1, 4, 3, 2, 0, 2},
      {"both", 1, 2, 4, 3, 2, 3, 2},
      {"scalar_both", 1, 2, 4, 2, 3, 1, 1},
      {"scalar_key_value", 1, 1, 5, 2, 3, 1, 3},
      {"key_scalar_value", 1, 1, 5, 3, 2, 3, 1},
      {"initial_state", 1, 2, 3, 3, 2, 3, 2, true},
      {"initial_state_no_decay", 2, 1, 3, 2, 2, 0, 0, true},
      {"final_state", 1, 2, 4, 3, 2, 3, 2, true, true},
      {"final_state_scalar", 1, 1, 4, 2, 3, 1, 0, false, true},
      {"one_step", 2, 1, 1, 3, 2, 3, 2, true, true},
      // The CPU backward keeps a checkpoint every 64 steps: 70 steps cross one.
      {"across_chunks", 1, 1, 70, 2, 2, 2, 1, true, true},
      {"decays_near_floor", 1, 2, 4, 3, 2, 3, 2, true, true, false, in_range(-20.5, -19.5)},
      {"decays_near_zero", 1, 2, 4, 3, 2, 3, 2, true, true, false, in_range(-1e-5, -1e-7)},
      {"heads_last_layout", 2, 2, 3, 3, 2, 3, 1, false, false, true},
      {"dv_one", 1, 1, 4, 3, 1, 1, 1},
      {"dk_one", 1, 1, 4, 1, 3, 1, 3},
      {"zero_positions", 1, 2, 0, 3, 2, 3, 2, true, true},
      {"zero_batch", 0, 2, 3, 3, 2, 3, 2},
  };
  for (const Row& r : rows) {
    // Leaves in order q, k, v, then gk, gv and the initial state where present.
    auto seq = [&](int64_t d) { return r.heads_last ? Shape{r.B, r.T, r.H, d} : Shape{r.B, r.H, r.T, d}; };
    std::vector<Shape> shapes = {seq(r.dk), seq(r.dk), seq(r.dv)};
    std::vector<Draw> draws = {normal(), normal(), normal()};
    for (int64_t width : {r.gk_width, r.gv_width})
      if (width > 0) {
        shapes.push_back(seq(width));
        draws.push_back(r.decay);
      }
    if (r.initial_state) {
      shapes.push_back({r.B, r.H, r.dv, r.dk});
      draws.push_back(normal());
    }
    add(table, "gated_linear_scan/" + r.name, inputs(shapes, draws), [r](const std::vector<Tensor>& x) {
      auto heads = [&](const Tensor& t) { return r.heads_last ? transpose(t, 1, 2) : t; };
      size_t next = 3;
      const Tensor gk = r.gk_width > 0 ? heads(x[next++]) : Tensor();
      const Tensor gv = r.gv_width > 0 ? heads(x[next++]) : Tensor();
      const Tensor s0 = r.initial_state ? x[next] : Tensor();
      const Tensor q = heads(x[0]), k = heads(x[1]), v = heads(x[2]);
      if (!r.with_state) return gated_linear_scan(q, k, v, gk, gv, s0);
      const ScanResult res = gated_linear_scan_with_state(q, k, v, gk, gv, s0);
      return cat({flatten(res.out), flatten(res.final_state)}, 0);
    });
  }
}

}  // namespace linea::gradcheck::cases
