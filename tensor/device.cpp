#include "tensor/device.h"

#include <charconv>

#include "tensor/error.h"

namespace linea {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    // from_chars reports an index too large for an int instead of throwing, as stoi would.
    const char* first = text.data() + 5;
    const char* last = text.data() + text.size();
    int index = -1;
    const auto [end, error] = std::from_chars(first, last, index);
    if (first != last && error == std::errc() && end == last && index >= 0) return cuda(index);
  }
  fail("device", "unknown device '", text, "' (expected cpu, cuda or cuda:N)");
}

}  // namespace linea
