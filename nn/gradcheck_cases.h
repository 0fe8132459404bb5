#pragma once
// The nn rows of the gradient-check table: one or more per module, each checking the module's
// output w.r.t. its input AND all its parameters (nn/gradcheck_module.h). `linea gradcheck` and
// tests/nn/nn_gradcheck_test.cpp run them, next to the op rows of autograd/gradcheck_cases.h.
// A row's op is the module's name: `linea gradcheck RMSNorm CausalConv1D`.
#include <vector>

#include "autograd/gradcheck_cases.h"

namespace linea::nn {

std::vector<gradcheck::Case> module_cases();

// The families of rows, one function per file of nn/gradcheck_cases_*.cpp.
void add_layer_cases(std::vector<gradcheck::Case>& cases);  // gradcheck_cases_layers.cpp
void add_scan_cases(std::vector<gradcheck::Case>& cases);   // gradcheck_cases_scan.cpp
void add_attention_cases(std::vector<gradcheck::Case>& cases);  // gradcheck_cases_attention.cpp
void add_linear_attention_cases(std::vector<gradcheck::Case>& cases);  // gradcheck_cases_linear.cpp
void add_recurrent_cases(std::vector<gradcheck::Case>& cases);  // gradcheck_cases_recurrent.cpp
void add_model_cases(std::vector<gradcheck::Case>& cases);  // gradcheck_cases_model.cpp: the LM, per letter

}  // namespace linea::nn
