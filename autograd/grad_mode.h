#pragma once
// Grad mode: while it is off (inside a NoGradGuard), ops record nothing, as in an optimizer step
// or evaluation. It is per thread.
namespace linea {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

class NoGradGuard {
 public:
  NoGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace linea
