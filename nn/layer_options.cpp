#include "nn/layer_options.h"

namespace linea::nn {

void LayerOptions::finish() const {
  for (const auto& [key, value] : options_.items()) {
    if (known_.count(key)) continue;
    std::string list;
    for (const std::string& k : known_) list += (list.empty() ? "" : ", ") + k;
    fail("config", context(), ": unknown option \"", key, "\" (known: ", list, ")");
  }
}

}  // namespace linea::nn
