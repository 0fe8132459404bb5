#pragma once
// Gradient checks of a module w.r.t. its inputs AND all its parameters, for every layer's row in
// the gradient-check table (nn/gradcheck_cases*.cpp) and for ad-hoc tests.
//
// gradcheck::check differentiates a function of tensors. A module's forward becomes one by
// swapping its parameters for the function's trailing arguments (Module::swap_parameters): the
// check's own leaves then sit in the module's slots while forward runs, and are swapped out
// again afterwards, so autograd and finite differences both see the parameters as inputs.
//
//   cases.push_back(module_case(
//       "Linear/bias",
//       [](Generator& gen) { return std::make_shared<Linear>(4, 3, gen); },
//       inputs_of({{2, 5, 4}}),
//       [](Linear& m, const std::vector<Tensor>& x) { return m.forward(x[0]); }));
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/gradcheck_cases.h"
#include "nn/mixer.h"
#include "nn/module.h"

namespace linea::nn {

// Draws a module's non-parameter inputs (float64) from the case's generator.
using MakeInputs = std::function<std::vector<Tensor>(Generator& gen)>;
using ModuleForward = std::function<Tensor(Module& module, const std::vector<Tensor>& inputs)>;

// Standard-normal float64 inputs of the given shapes.
MakeInputs inputs_of(std::vector<Shape> shapes, double scale = 1.0);

// forward as a function of (inputs..., parameters...), the parameters in named_parameters()
// order; module's own parameter tensors are back in place when it returns.
gradcheck::Function with_parameters(std::shared_ptr<Module> module, ModuleForward forward, size_t num_inputs);

// The parameters' current values plus N(0, jitter^2) noise: norm weights start at exactly one and
// biases at zero, values that would hide a missing factor or term in a backward.
std::vector<Tensor> jittered_parameters(const Module& module, Generator& gen, double jitter = 0.1);

// Checks forward w.r.t. inputs and every parameter of module (converted to float64).
gradcheck::Result check_module(Module& module, const std::vector<Tensor>& inputs, const ModuleForward& forward,
                               const gradcheck::Options& options = {});

// A sequence mixer's output over x (B, T, D): its parallel form, or with `decode` its decoding
// form one token at a time (the rows that check both forms' gradients).
Tensor mixer_output(SequenceMixer& mixer, const Tensor& x, bool decode);

namespace detail {
gradcheck::Case module_case(std::string name, std::function<std::shared_ptr<Module>(Generator&)> build,
                            MakeInputs make_inputs, ModuleForward forward, gradcheck::Options options);
}

// A row of the gradient-check table: build(gen) makes the module (converted to float64), whose
// parameters and the drawn inputs are the checked values; forward(module, inputs) computes the
// output. The op is the part of the name before '/', the module's name ("Linear").
template <class Build, class Forward>
gradcheck::Case module_case(std::string name, Build build, MakeInputs make_inputs, Forward forward,
                            gradcheck::Options options = {}) {
  using M = typename std::invoke_result_t<Build, Generator&>::element_type;
  return detail::module_case(
      std::move(name), [build](Generator& gen) -> std::shared_ptr<Module> { return build(gen); },
      std::move(make_inputs),
      [forward](Module& m, const std::vector<Tensor>& x) { return forward(static_cast<M&>(m), x); }, options);
}

}  // namespace linea::nn
