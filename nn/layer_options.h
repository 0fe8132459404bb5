#pragma once
// Reads one layer letter's overrides from the model config's "layers" object and refuses any key
// that no one asked for, so a typo in a config is an error rather than a silently ignored option.
//
//   LayerOptions o(config.options_for('S'), 'S');
//   c.window = o.get<int64_t>("window", c.window);
//   o.finish();   // "layer 'S': unknown option \"windw\" (known: kv_heads, window, ...)"
#include <set>
#include <string>

#include "nn/json.h"

namespace linea::nn {

class LayerOptions {
 public:
  LayerOptions(json::Value options, char letter) : options_(std::move(options)), letter_(letter) {}

  template <class T>
  T get(const std::string& key, T fallback) {
    known_.insert(key);
    return json::get_or<T>(options_, key, fallback, context());
  }
  void finish() const;

 private:
  std::string context() const { return std::string("layer '") + letter_ + "'"; }
  json::Value options_;
  char letter_;
  std::set<std::string> known_;
};

}  // namespace linea::nn
