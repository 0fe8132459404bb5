#pragma once
// The unary ops that take bfloat16, as a user calls them, each with the inputs it is defined on:
// the CPU's test of their float32 math rounded once (tests/tensor/bfloat16_test.cpp) and the
// GPU's parity with it (tests/cuda/bfloat16_test.cpp) go through the same list.
#include <functional>
#include <vector>

#include "autograd/ops.h"

namespace linea::testing {

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> f;
  bool positive = false;  // needs x > 0 (log, sqrt, ...)
};
inline std::vector<UnaryCase> bf16_unary_cases() {
  return {{"neg", [](const Tensor& t) { return -t; }},
          {"exp", [](const Tensor& t) { return exp(t); }},
          {"log", [](const Tensor& t) { return log(t); }, true},
          {"sqrt", [](const Tensor& t) { return sqrt(t); }, true},
          {"rsqrt", [](const Tensor& t) { return rsqrt(t); }, true},
          {"abs", [](const Tensor& t) { return abs(t); }},
          {"sin", [](const Tensor& t) { return sin(t); }},
          {"cos", [](const Tensor& t) { return cos(t); }},
          {"tanh", [](const Tensor& t) { return tanh(t); }},
          {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
          {"logsigmoid", [](const Tensor& t) { return logsigmoid(t); }},
          {"softplus", [](const Tensor& t) { return softplus(t); }},
          {"relu", [](const Tensor& t) { return relu(t); }},
          {"elu", [](const Tensor& t) { return elu(t, 0.7); }},
          {"gelu", [](const Tensor& t) { return gelu(t); }},
          {"gelu_tanh", [](const Tensor& t) { return gelu(t, GeluApprox::Tanh); }},
          {"silu", [](const Tensor& t) { return silu(t); }},
          {"pow", [](const Tensor& t) { return pow(t, 1.5); }, true},
          {"clamp", [](const Tensor& t) { return clamp(t, -0.5, 0.75); }},
          {"square", [](const Tensor& t) { return square(t); }},
          {"reciprocal", [](const Tensor& t) { return reciprocal(t); }, true},
          {"log1p", [](const Tensor& t) { return log1p(t); }, true},
          {"expm1", [](const Tensor& t) { return expm1(t); }},
          {"sign", [](const Tensor& t) { return sign(t); }}};
}

}  // namespace linea::testing
