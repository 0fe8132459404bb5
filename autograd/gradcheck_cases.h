#pragma once
// The table of gradient-check cases: one row per (op, input situation). The GoogleTest suite
// (tests/autograd/gradcheck_table_test.cpp) and `linea gradcheck` run the same rows, so the
// command line reports exactly what CI checks. nn/ adds its modules' rows (nn/gradcheck_cases.h).
#include <functional>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "tensor/random.h"

namespace linea::gradcheck {

struct Case {
  std::string name;  // unique, "<op>/<situation>", e.g. "matmul/batch_broadcast"
  std::string op;    // what `linea gradcheck OP` selects, e.g. "matmul"
  // Fresh float64 inputs drawn from gen (random, away from kinks: never zeros or ones alone).
  std::function<std::vector<Tensor>(Generator& gen)> make_inputs;
  Function f;
  Options options = {};
};

// Every differentiable op of autograd/ops.h, with broadcasting, non-contiguous (permuted,
// sliced, expanded) and zero-size inputs.
std::vector<Case> op_cases();

// Draws the case's inputs from a generator seeded by `seed` and runs the check.
Result run_case(const Case& c, uint64_t seed = 1);

}  // namespace linea::gradcheck
