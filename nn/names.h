#pragma once
// The names of nn's options (the model's norm and MLP kinds, the linear-attention feature maps,
// gates, norms, presets...), as configs, the command line and describe() write them: one table
// per enum, read both ways by these helpers.
#include <string>
#include <utility>

#include "tensor/error.h"

namespace linea::nn::names {

template <class Enum>
using Table = std::pair<Enum, const char*>;

template <class Enum, size_t N>
std::string name_in(const Table<Enum> (&table)[N], Enum value) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return "unknown";
}

// The value named `name`, else an Error from `op` listing the known names.
template <class Enum, size_t N>
Enum parse_in(const Table<Enum> (&table)[N], const std::string& name, const char* op, const char* what) {
  std::string known;
  for (const auto& [v, n] : table) {
    if (name == n) return v;
    known += std::string(known.empty() ? "" : ", ") + n;
  }
  fail(op, "unknown ", what, " '", name, "' (known: ", known, ")");
}

}  // namespace linea::nn::names
