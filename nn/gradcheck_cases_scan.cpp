// Gradient-check rows for the gated linear attention scan (nn/linear_attention/scan.h). Each row checks
// the chunked form's output and final state together (flattened into one vector) against finite
// differences, w.r.t. every input: q, k, v, the log decays and the initial state. Sizes are small
// but keep what matters: T not a multiple of the chunk, chunks of several sub-blocks (so the
// earlier-sub-block products run), dk != dv, and log decays well below 0, as gates give.
#include <string>
#include <vector>

#include "autograd/gradcheck_cases_build.h"
#include "nn/linear_attention/scan.h"

namespace linea::nn {

namespace {

namespace gc = gradcheck::cases;

constexpr int64_t kB = 1, kH = 2, kT = 11, kDk = 3, kDv = 2;

// What a row feeds the scan: which decays exist and whether they are per channel or scalar.
enum class Decay { None, Scalar, PerChannel };

int64_t decay_width(Decay d, int64_t channels) { return d == Decay::PerChannel ? channels : 1; }

// inputs: q, k, v, then gk and gv when present, then the initial state.
void add_chunked_row(gc::Table& table, const std::string& situation, Decay key, Decay value) {
  std::vector<Shape> shapes = {{kB, kH, kT, kDk}, {kB, kH, kT, kDk}, {kB, kH, kT, kDv}};
  std::vector<gc::Draw> draws(3, gc::normal());
  // Log decays of gates between about 0.2 and 0.95 per step.
  if (key != Decay::None) {
    shapes.push_back({kB, kH, kT, decay_width(key, kDk)});
    draws.push_back(gc::in_range(-1.5, -0.05));
  }
  if (value != Decay::None) {
    shapes.push_back({kB, kH, kT, decay_width(value, kDv)});
    draws.push_back(gc::in_range(-1.5, -0.05));
  }
  shapes.push_back({kB, kH, kDv, kDk});
  draws.push_back(gc::normal(0.5));
  gc::add(table, "chunked_scan/" + situation, gc::inputs(shapes, draws),
          [key, value](const std::vector<Tensor>& x) {
            size_t i = 3;
            const Tensor gk = key != Decay::None ? x[i++] : Tensor();
            const Tensor gv = value != Decay::None ? x[i++] : Tensor();
            Tensor final_state;
            // Chunks of 4 in sub-blocks of 2: T = 11 leaves a padded last chunk.
            const Tensor o = linear::chunked_scan(x[0], x[1], x[2], gk, gv, x[i], &final_state, {4, 2});
            return cat({flatten(o), flatten(final_state)}, 0);
          });
}

}  // namespace

void add_scan_cases(std::vector<gradcheck::Case>& table) {
  add_chunked_row(table, "no_decay", Decay::None, Decay::None);
  add_chunked_row(table, "scalar_key_decay", Decay::Scalar, Decay::None);
  add_chunked_row(table, "key_decay", Decay::PerChannel, Decay::None);         // GLA
  add_chunked_row(table, "value_decay", Decay::None, Decay::PerChannel);       // ReGLA as written
  add_chunked_row(table, "both_decays", Decay::PerChannel, Decay::PerChannel);  // Fast Decay
  add_chunked_row(table, "scalar_and_value_decay", Decay::Scalar, Decay::PerChannel);

  // One recurrent step, both decays per channel: state in, (output, state) out.
  gc::add(table, "scan_step/both_decays",
          gc::inputs({{kB, kH, kDk}, {kB, kH, kDk}, {kB, kH, kDv}, {kB, kH, kDk}, {kB, kH, kDv}, {kB, kH, kDv, kDk}},
                     {gc::normal(), gc::normal(), gc::normal(), gc::in_range(-1.5, -0.05), gc::in_range(-1.5, -0.05),
                      gc::normal()}),
          [](const std::vector<Tensor>& x) {
            Tensor state = x[5];
            const Tensor o = linear::scan_step(x[0], x[1], x[2], x[3], x[4], state);
            return cat({flatten(o), flatten(state)}, 0);
          });
}

}  // namespace linea::nn
