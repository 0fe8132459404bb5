#include "tensor/device.h"

#include "tensor/error.h"

namespace linea {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 &&
      text.find_first_not_of("0123456789", 5) == std::string::npos)
    return cuda(std::stoi(text.substr(5)));
  fail("device", "unknown device '", text, "' (expected cpu, cuda or cuda:N)");
}

}  // namespace linea
