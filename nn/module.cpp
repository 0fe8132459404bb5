#include "nn/module.h"

#include <set>

#include "tensor/transfer.h"

namespace linea::nn {

void Module::check_name(const std::string& name) const {
  LINEA_CHECK(!name.empty() && name.find('.') == std::string::npos, "Module", "invalid member name '", name,
              "' (non-empty, no dots)");
  auto taken = [&](const auto& list) {
    for (const auto& entry : list)
      if (entry.name == name) return true;
    return false;
  };
  bool child_taken = false;
  for (const auto& [child_name, child] : children_) child_taken |= child_name == name;
  LINEA_CHECK(!taken(parameters_) && !taken(buffers_) && !child_taken, "Module", "name '", name,
              "' is registered twice");
}

void Module::register_parameter(const std::string& name, Tensor* slot, bool weight_decay) {
  check_name(name);
  LINEA_CHECK(slot != nullptr && slot->defined(), "Module", "parameter '", name, "' is undefined");
  if (!slot->requires_grad()) slot->requires_grad_(true);
  parameters_.push_back({name, slot, weight_decay});
}

void Module::register_buffer(const std::string& name, Tensor* slot) {
  check_name(name);
  LINEA_CHECK(slot != nullptr && slot->defined(), "Module", "buffer '", name, "' is undefined");
  buffers_.push_back({name, slot, false});
}

template <class Fn>
void Module::visit_slots(const std::string& prefix, bool parameters, Fn&& fn) const {
  for (const Slot& s : parameters ? parameters_ : buffers_) fn(prefix + s.name, s);
  for (const auto& [name, child] : children_) child->visit_slots(prefix + name + ".", parameters, fn);
}

std::vector<NamedParameter> Module::named_parameters() const {
  std::vector<NamedParameter> out;
  visit_slots("", true, [&](const std::string& name, const Slot& s) { out.push_back({name, *s.tensor, s.weight_decay}); });
  return out;
}

// named_parameters() builds every name from its modules' prefixes, about a microsecond a
// parameter; a training step asks for the parameters alone each step, so they skip the names.
std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  append_parameters(out);
  return out;
}

void Module::append_parameters(std::vector<Tensor>& out) const {
  for (const Slot& s : parameters_) out.push_back(*s.tensor);
  for (const auto& child : children_) child.second->append_parameters(out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  visit_slots("", false, [&](const std::string& name, const Slot& s) { out.emplace_back(name, *s.tensor); });
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const NamedParameter& p : named_parameters()) n += p.tensor.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

StateDict Module::state_dict() const {
  StateDict out;
  auto add = [&](const std::string& name, const Slot& s) { out[name] = detach(*s.tensor); };
  visit_slots("", true, add);
  visit_slots("", false, add);
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  std::set<std::string> used;
  auto load = [&](const std::string& name, const Slot& s) {
    auto it = state.find(name);
    if (it == state.end()) {
      LINEA_CHECK(!strict, "load_state_dict", "missing entry '", name, "'");
      return;
    }
    LINEA_CHECK(it->second.shape() == s.tensor->shape(), "load_state_dict", "entry '", name, "' has shape ",
                shape_str(it->second.shape()), " but the module expects ", shape_str(s.tensor->shape()));
    NoGradGuard no_grad;
    copy_into(*s.tensor, it->second);
    used.insert(name);
  };
  visit_slots("", true, load);
  visit_slots("", false, load);
  if (strict)
    for (const auto& [name, t] : state)
      LINEA_CHECK(used.count(name), "load_state_dict", "unexpected entry '", name, "' (no such parameter or buffer)");
}

void Module::swap_parameters(std::vector<Tensor>& tensors) {
  std::vector<std::pair<std::string, Tensor*>> slots;
  visit_slots("", true, [&](const std::string& name, const Slot& s) { slots.emplace_back(name, s.tensor); });
  LINEA_CHECK(slots.size() == tensors.size(), "swap_parameters", "got ", tensors.size(), " tensors for ", slots.size(),
              " parameters");
  // Every tensor is checked before any is swapped, so a refused swap changes nothing.
  for (size_t i = 0; i < slots.size(); ++i) {
    const Tensor& mine = *slots[i].second;
    const Tensor& t = tensors[i];
    LINEA_CHECK(t.defined() && t.shape() == mine.shape() && t.dtype() == mine.dtype() && t.device() == mine.device(),
                "swap_parameters", "parameter '", slots[i].first, "' is ", mine.describe(), " but got ",
                t.defined() ? t.describe() : std::string("an undefined tensor"));
  }
  for (size_t i = 0; i < slots.size(); ++i) std::swap(*slots[i].second, tensors[i]);
}

void Module::to(Device device) {
  auto move = [&](const std::string&, const Slot& s) {
    const bool trainable = s.tensor->requires_grad();
    Tensor moved = copy_to(detach(*s.tensor), device);
    if (trainable) moved.requires_grad_(true);
    *s.tensor = moved;
  };
  visit_slots("", true, move);
  visit_slots("", false, move);
}

void Module::to(DType dtype) {
  auto convert = [&](const std::string&, const Slot& s) {
    if (!is_floating(s.tensor->dtype()) || s.tensor->dtype() == dtype) return;
    const bool trainable = s.tensor->requires_grad();
    Tensor converted = linea::to(detach(*s.tensor), dtype);
    if (trainable) converted.requires_grad_(true);
    *s.tensor = converted;
  };
  visit_slots("", true, convert);
  visit_slots("", false, convert);
}

void Module::zero_grad() {
  for (const NamedParameter& p : named_parameters()) p.tensor.set_grad(Tensor());
}

}  // namespace linea::nn
