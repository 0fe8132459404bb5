#pragma once
// Module: the unit models are built from. A module owns named parameters (tensors that require
// grad), named buffers (state saved with the model but not trained, e.g. a random projection) and
// named child modules, so every parameter has a hierarchical name such as
// "blocks.3.mixer.q_proj.weight" (used by state dicts, checkpoints and the optimizer).
//
// A module registers its members by pointer (register_parameter("weight", &weight_)), so
// moving it to another device or dtype replaces the member tensors themselves.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"

namespace linea::nn {

using StateDict = std::map<std::string, Tensor>;

struct NamedParameter {
  std::string name;
  Tensor tensor;
  bool weight_decay;  // false for norms, biases and embeddings (AdamW leaves them alone)
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Depth-first in registration order, so the order is stable across runs.
  std::vector<NamedParameter> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  int64_t num_parameters() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Parameters and buffers by name (detached aliases, sharing storage with the module).
  StateDict state_dict() const;
  // Copies values in by name. strict: every name must match both ways; shapes must match always.
  void load_state_dict(const StateDict& state, bool strict = true);

  // Exchanges the parameter tensors themselves (not their values) with `tensors`, in
  // named_parameters() order; shapes, dtypes and devices must match. Swapping in fresh leaves
  // makes the next forward differentiable w.r.t. them (nn/gradcheck_module.h); swapping again
  // puts the module's own tensors back.
  void swap_parameters(std::vector<Tensor>& tensors);

  void to(Device device);
  void to(DType dtype);
  void zero_grad();

  // The direct children in registration order (name, module): for code that looks for a kind of
  // layer by name, e.g. LoRA's targets (nn/layers/lora.h).
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }

 protected:
  void register_parameter(const std::string& name, Tensor* slot, bool weight_decay = true);
  void register_buffer(const std::string& name, Tensor* slot);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    check_name(name);
    children_.emplace_back(name, child);
    return child;
  }

 private:
  struct Slot {
    std::string name;
    Tensor* tensor;
    bool weight_decay;
  };
  void check_name(const std::string& name) const;
  void append_parameters(std::vector<Tensor>& out) const;  // parameters(), in named_parameters() order
  template <class Fn>
  void visit_slots(const std::string& prefix, bool parameters, Fn&& fn) const;

  std::vector<Slot> parameters_;
  std::vector<Slot> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace linea::nn
