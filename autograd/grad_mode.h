#pragma once
// Grad mode: while it is off (inside a NoGradGuard), ops record nothing, as in an optimizer step
// or evaluation. It is per thread.
#include "tensor/scoped_setting.h"

namespace linea {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

class NoGradGuard : public ScopedSetting<bool, is_grad_enabled, set_grad_enabled> {
 public:
  NoGradGuard() : ScopedSetting(false) {}
};

}  // namespace linea
