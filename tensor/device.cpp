#include "tensor/device.h"

#include "tensor/error.h"
#include "tensor/number_text.h"

namespace linea {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    // An index too large for an int is reported, not thrown as by stoi.
    int index = -1;
    if (parse_whole_number(std::string_view(text).substr(5), index) == std::errc() && index >= 0) return cuda(index);
  }
  fail("device", "unknown device '", text, "' (expected cpu, cuda or cuda:N)");
}

}  // namespace linea
