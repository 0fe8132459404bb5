#pragma once
// Optimizer: updates a model's parameters from their gradients. The base class owns what every
// optimizer shares: the named parameters, the learning rate, per-parameter state buffers (AdamW's
// moments, SGD's momentum) and their checkpointing; a subclass writes only its update rule.
//
//   AdamW opt(model.named_parameters(), {.lr = 3e-4, .weight_decay = 0.1});
//   loss.backward();
//   opt.set_lr(schedule(step));
//   opt.step();
//   opt.zero_grad();
//
// State buffers are made when the optimizer is made, as zeros on each parameter's device and of
// its dtype, one tensor per parameter and kind: the same layout as the parameters, so whatever
// flattens gradients into buckets (data parallel) can flatten the state the same way. Make the
// optimizer after moving the model (Module::to replaces the parameter tensors).
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace linea::train {

using nn::NamedParameter;

// What a checkpoint keeps of an optimizer. Tensors are named "<kind>.<parameter name>", e.g.
// "exp_avg.blocks.0.mixer.q_proj.weight"; scalars are "lr", "step" (calls of step()) and
// "step.<parameter name>" (updates that parameter has had: a parameter without a gradient in a
// step is not updated, and AdamW's bias correction counts its own updates, as PyTorch does).
struct OptimizerState {
  std::string type;  // "adamw", "sgd": loading one into the other is an error
  std::map<std::string, Tensor> tensors;
  std::map<std::string, double> scalars;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient, in place and outside autograd, reading each
  // gradient as grad_scale * grad without writing it: clipping by the global norm comes in here
  // (train_step.cpp), where scaling every gradient first would cost a pass and a launch each.
  void step(double grad_scale = 1.0);
  // Drops the gradients (the next backward starts from none rather than adding to zeros).
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr);
  int64_t steps() const { return steps_; }
  std::vector<NamedParameter> parameters() const;
  const std::string& type() const { return type_; }

  // The tensors are aliases of the live buffers: write or clone them before the next step().
  OptimizerState state() const;
  // Copies a saved state in (to each parameter's device and dtype). Every name must match both
  // ways and every shape must match; nothing is changed unless everything does.
  void load_state(const OptimizerState& state);

 protected:
  // buffer_kinds: the per-parameter buffers the update rule keeps, e.g. {"exp_avg", "exp_avg_sq"}.
  Optimizer(std::string type, std::vector<NamedParameter> params, double lr, std::vector<std::string> buffer_kinds);

  // One parameter's update from grad_scale * grad. param.tensor and buffers are written in place;
  // `updates` counts this update (1 on the first).
  struct Slot {
    NamedParameter param;
    std::vector<Tensor> buffers;  // in the order of buffer_kinds
    int64_t updates = 0;
  };
  virtual void update(Slot& slot, const Tensor& grad, double grad_scale) = 0;

 private:
  std::string type_;
  std::vector<std::string> buffer_kinds_;
  std::vector<Slot> slots_;
  double lr_;
  int64_t steps_ = 0;
};

// An optimizer with its own options struct (AdamWOptions, SGDOptions, each with an `lr`): keeps
// them, hands their learning rate to the Optimizer, and gives them back to read.
template <class Options>
class OptimizerWith : public Optimizer {
 public:
  const Options& options() const { return options_; }

 protected:
  OptimizerWith(std::string type, std::vector<NamedParameter> params, const Options& options,
                std::vector<std::string> buffer_kinds)
      : Optimizer(std::move(type), std::move(params), options.lr, std::move(buffer_kinds)), options_(options) {}

  const Options options_;
};

}  // namespace linea::train
