#include "nn/gradcheck_module.h"

namespace linea::nn {

MakeInputs inputs_of(std::vector<Shape> shapes, double scale) {
  return [shapes = std::move(shapes), scale](Generator& gen) {
    std::vector<Tensor> xs;
    for (const Shape& s : shapes) xs.push_back(randn(s, kFloat64, &gen) * scale);
    return xs;
  };
}

Tensor mixer_output(SequenceMixer& mixer, const Tensor& x, bool decode) {
  if (!decode) return mixer.forward(x);
  auto state = mixer.init_state(x.size(0));
  std::vector<Tensor> ys;
  for (int64_t t = 0; t < x.size(1); ++t) ys.push_back(mixer.step(select(x, 1, t), *state));
  return stack(ys, 1);
}

gradcheck::Function with_parameters(std::shared_ptr<Module> module, ModuleForward forward, size_t num_inputs) {
  return [module = std::move(module), forward = std::move(forward), num_inputs](const std::vector<Tensor>& all) {
    LINEA_CHECK(all.size() >= num_inputs, "with_parameters", "got ", all.size(), " tensors for ", num_inputs,
                " inputs and the parameters");
    const std::vector<Tensor> inputs(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(num_inputs));
    std::vector<Tensor> params(all.begin() + static_cast<std::ptrdiff_t>(num_inputs), all.end());
    module->swap_parameters(params);
    // Swaps the module's own parameters back however forward ends.
    struct Restore {
      Module& m;
      std::vector<Tensor>& p;
      ~Restore() { m.swap_parameters(p); }
    } restore{*module, params};
    return forward(*module, inputs);
  };
}

std::vector<Tensor> jittered_parameters(const Module& module, Generator& gen, double jitter) {
  std::vector<Tensor> out;
  NoGradGuard no_grad;
  for (const Tensor& p : module.parameters()) out.push_back(detach(p) + randn(p.shape(), {p.dtype(), p.device()}, &gen) * jitter);
  return out;
}

gradcheck::Result check_module(Module& module, const std::vector<Tensor>& inputs, const ModuleForward& forward,
                               const gradcheck::Options& options) {
  module.to(kFloat64);
  std::vector<Tensor> all = inputs;
  for (const Tensor& p : module.parameters()) all.push_back(detach(p));
  // A non-owning handle: the module outlives the check.
  const std::shared_ptr<Module> handle(&module, [](Module*) {});
  return gradcheck::check(with_parameters(handle, forward, inputs.size()), all, options);
}

namespace detail {

gradcheck::Case module_case(std::string name, std::function<std::shared_ptr<Module>(Generator&)> build,
                            MakeInputs make_inputs, ModuleForward forward, gradcheck::Options options) {
  // f runs a prototype built once: only its structure matters, since every parameter value f
  // sees is swapped in from the checked tensors. The values themselves come from a module built
  // from the case's generator, so a different seed checks different weights.
  Generator prototype_gen(0);
  std::shared_ptr<Module> prototype = build(prototype_gen);
  prototype->to(kFloat64);
  const size_t num_inputs = make_inputs(prototype_gen).size();
  auto make = [build, make_inputs](Generator& gen) {
    std::shared_ptr<Module> fresh = build(gen);
    fresh->to(kFloat64);
    std::vector<Tensor> all = make_inputs(gen);
    for (Tensor& p : jittered_parameters(*fresh, gen)) all.push_back(p);
    return all;
  };
  const std::string op = name.substr(0, name.find('/'));
  return gradcheck::Case{std::move(name), op, make, with_parameters(prototype, std::move(forward), num_inputs),
                         options};
}

}  // namespace detail

}  // namespace linea::nn
