#include "train/optimizer.h"

#include <cmath>
#include <set>
#include <utility>

namespace linea::train {

namespace {

double read_scalar(const OptimizerState& state, const std::string& key) {
  const auto it = state.scalars.find(key);
  LINEA_CHECK(it != state.scalars.end(), "Optimizer.load_state", "the state lacks the scalar '", key, "'");
  return it->second;
}

// A scalar that must be a count (a corrupt or foreign file could hold anything).
int64_t read_count(const OptimizerState& state, const std::string& key) {
  const double v = read_scalar(state, key);
  LINEA_CHECK(v >= 0 && v <= 9e15 && v == std::floor(v), "Optimizer.load_state", "scalar '", key,
              "' should be a count, got ", v);
  return static_cast<int64_t>(v);
}

template <class Map>
void check_no_unknown(const Map& entries, const std::set<std::string>& expected, const char* what) {
  for (const auto& [name, value] : entries)
    LINEA_CHECK(expected.count(name), "Optimizer.load_state", "unexpected ", what, " '", name,
                "' (no such parameter or state in this optimizer)");
}

}  // namespace

Optimizer::Optimizer(std::string type, std::vector<NamedParameter> params, double lr,
                     std::vector<std::string> buffer_kinds)
    : type_(std::move(type)), buffer_kinds_(std::move(buffer_kinds)) {
  set_lr(lr);
  std::set<std::string> names;
  std::set<const TensorImpl*> tensors;
  for (NamedParameter& p : params) {
    LINEA_CHECK(!p.name.empty() && names.insert(p.name).second, type_.c_str(), "parameter name '", p.name,
                "' is empty or given twice");
    LINEA_CHECK(p.tensor.defined() && is_floating(p.tensor.dtype()), type_.c_str(), "parameter '", p.name,
                "' must be a floating tensor, got ", p.tensor.describe());
    // The same tensor under two names would be updated twice per step.
    LINEA_CHECK(tensors.insert(p.tensor.impl_ptr()).second, type_.c_str(), "parameter '", p.name,
                "' is a tensor already given under another name");
    Slot slot{std::move(p), {}, 0};
    for (size_t k = 0; k < buffer_kinds_.size(); ++k) slot.buffers.push_back(zeros_like(slot.param.tensor));
    slots_.push_back(std::move(slot));
  }
}

void Optimizer::set_lr(double lr) {
  LINEA_CHECK(std::isfinite(lr) && lr >= 0, type_.c_str(), "the learning rate must be finite and >= 0, got ", lr);
  lr_ = lr;
}

void Optimizer::step(double grad_scale) {
  LINEA_CHECK(std::isfinite(grad_scale), type_.c_str(), "the gradients' scale must be finite, got ", grad_scale);
  NoGradGuard no_grad;
  for (Slot& slot : slots_) {
    const Tensor grad = slot.param.tensor.grad();
    if (!grad.defined()) continue;
    ++slot.updates;
    update(slot, grad, grad_scale);
  }
  ++steps_;
}

void Optimizer::zero_grad() {
  for (const Slot& slot : slots_) slot.param.tensor.set_grad(Tensor());
}

std::vector<NamedParameter> Optimizer::parameters() const {
  std::vector<NamedParameter> out;
  for (const Slot& slot : slots_) out.push_back(slot.param);
  return out;
}

OptimizerState Optimizer::state() const {
  OptimizerState out{type_, {}, {{"lr", lr_}, {"step", static_cast<double>(steps_)}}};
  for (const Slot& slot : slots_) {
    for (size_t k = 0; k < buffer_kinds_.size(); ++k)
      out.tensors[buffer_kinds_[k] + "." + slot.param.name] = detach(slot.buffers[k]);
    out.scalars["step." + slot.param.name] = static_cast<double>(slot.updates);
  }
  return out;
}

void Optimizer::load_state(const OptimizerState& state) {
  LINEA_CHECK(state.type == type_, "Optimizer.load_state", "the state is of a '", state.type,
              "' optimizer, this one is '", type_, "'");
  // Check everything first, so that a bad state leaves the optimizer as it was.
  std::set<std::string> tensor_names, scalar_names{"lr", "step"};
  std::vector<std::pair<Tensor*, Tensor>> copies;
  std::vector<int64_t> updates;
  for (Slot& slot : slots_) {
    for (size_t k = 0; k < buffer_kinds_.size(); ++k) {
      const std::string name = buffer_kinds_[k] + "." + slot.param.name;
      const auto it = state.tensors.find(name);
      LINEA_CHECK(it != state.tensors.end(), "Optimizer.load_state", "the state lacks the tensor '", name, "'");
      LINEA_CHECK(it->second.defined() && it->second.shape() == slot.buffers[k].shape(), "Optimizer.load_state",
                  "tensor '", name, "' is ", it->second.describe(), " but the parameter is ",
                  slot.param.tensor.describe());
      tensor_names.insert(name);
      copies.emplace_back(&slot.buffers[k], it->second);
    }
    scalar_names.insert("step." + slot.param.name);
    updates.push_back(read_count(state, "step." + slot.param.name));
  }
  check_no_unknown(state.tensors, tensor_names, "tensor");
  check_no_unknown(state.scalars, scalar_names, "scalar");
  const int64_t steps = read_count(state, "step");
  const double lr = read_scalar(state, "lr");
  LINEA_CHECK(std::isfinite(lr) && lr >= 0, "Optimizer.load_state", "scalar 'lr' is ", lr);

  NoGradGuard no_grad;
  for (auto& [buffer, saved] : copies) copy_(*buffer, saved);
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i].updates = updates[i];
  steps_ = steps;
  lr_ = lr;
}

}  // namespace linea::train
