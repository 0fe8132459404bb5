#pragma once
// JSON for model configs, JSONL training logs, checkpoint metadata and safetensors headers: the
// values are nlohmann::ordered_json (Debian's nlohmann-json3-dev); parsing and writing are
// nlohmann's. This header adds what linea's callers need around them: errors that are
// linea::Error and name the file, line and column, and typed reads that name the key and what
// was expected.
//
//   json::Value cfg = json::parse(text, "config.json");  // "config.json, line 3, column 14: expected
//                                                         //  ',' or '}' after an object member, got 'x'"
//   int64_t d = json::get<int64_t>(cfg, "d_model", "config");
//   //   -> "config key 'd_model': expected an integer, got string"
//   double p = json::get_or<double>(cfg, "dropout", 0.0);
//   json::Value record;
//   record["step"] = 3;                                 // building values: nlohmann's own API
//   std::string line = json::dump(record);              // one line: a JSONL record
//
// On top of nlohmann's defaults: objects keep their members in insertion order (ordered_json),
// so files are stable and diffable; a key used twice in one object is an error when parsing (in a
// config it is always a mistake), and so is nesting deeper than 512 arrays and objects.
//
// Numbers: an integer literal stays an exact integer (int64, or uint64 above INT64_MAX: step
// counts, seeds and offsets survive beyond 2^53); anything else is a double, which dump writes with
// the shortest digits that read back to the same bits, laid out as 0.0003, 1e-05, 3.0, 1e+15:
// always with a '.' or an exponent, so it reads back as a double. JSON (RFC 8259) has no NaN or
// infinities: dump writes them as null, and parsing refuses NaN, Infinity and numbers beyond the
// range of a double.
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor/error.h"

namespace linea::json {

using Value = nlohmann::ordered_json;

// Parses one JSON text (any value at the top, surrounded by whitespace). Errors name the line,
// the column (in bytes, from 1) and what was expected: "linea.json: line 3, column 14: expected
// ',' or '}' after an object member, got 'x'". `source` (a file name), when given, prefixes the
// position.
Value parse(std::string_view text, std::string_view source = {});
// One value per non-blank line (JSONL); errors name the line of the file.
std::vector<Value> parse_lines(std::string_view text, std::string_view source = {});

// indent < 0: one line, no spaces (a JSONL record); indent >= 0: one member or element per line,
// nested by indent spaces. A string that is not valid UTF-8 is an error.
std::string dump(const Value& v, int indent = -1);

// Object members. find: nullptr when v is not an object or has no such key. at: the member,
// or an error naming the key and the keys present ("config key 'heads' is missing (present:
// 'd_model', 'layers')"); `context` names what the object is.
const Value* find(const Value& v, std::string_view key);
const Value& at(const Value& v, std::string_view key, std::string_view context = {});
// Array elements, bounds checked.
const Value& at(const Value& v, size_t index);

// Typed reads; the wrong kind is an error "expected a number, got string", prefixed by `where`.
// T is bool, a signed or unsigned integer type (range-checked; an integral double counts), float,
// double (any number) or std::string.
template <class T>
T as(const Value& v, std::string_view where = {});
// Typed member reads: get<int64_t>(v, "d_model", "config") -> "config key 'd_model': expected an
// integer, got string". get_or falls back when the key is absent or null; a present key of the
// wrong kind fails.
template <class T>
T get(const Value& v, std::string_view key, std::string_view context = {});
template <class T>
T get_or(const Value& v, std::string_view key, T fallback, std::string_view context = {});

}  // namespace linea::json

// ---- template definitions ----
namespace linea::json {

namespace detail {
[[noreturn]] void wrong_kind(const Value& v, std::string_view where, const char* expected);
[[noreturn]] void out_of_range(const Value& v, std::string_view where, const std::string& low, const std::string& high);
int64_t read_int64(const Value& v, std::string_view where);  // beyond int64: out_of_range
std::string describe_key(std::string_view key, std::string_view context);

template <class T>
T read_integer(const Value& v, std::string_view where) {
  using Limits = std::numeric_limits<T>;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(Limits::max())) return static_cast<T>(u);
  } else {
    const int64_t i = read_int64(v, where);
    const bool below = std::is_unsigned_v<T> ? i < 0 : i < static_cast<int64_t>(Limits::min());
    const bool above = i > 0 && static_cast<uint64_t>(i) > static_cast<uint64_t>(Limits::max());
    if (!below && !above) return static_cast<T>(i);
  }
  out_of_range(v, where, std::to_string(Limits::min()), std::to_string(Limits::max()));
}
}  // namespace detail

template <class T>
T as(const Value& v, std::string_view where) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) detail::wrong_kind(v, where, "a bool");
    return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    return detail::read_integer<T>(v, where);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) detail::wrong_kind(v, where, "a number");
    return v.get<T>();
  } else {
    static_assert(std::is_same_v<T, std::string>, "json::as<T>: T must be bool, an integer, a float or std::string");
    if (!v.is_string()) detail::wrong_kind(v, where, "a string");
    return v.get<std::string>();
  }
}

template <class T>
T get(const Value& v, std::string_view key, std::string_view context) {
  return as<T>(at(v, key, context), detail::describe_key(key, context));
}

template <class T>
T get_or(const Value& v, std::string_view key, T fallback, std::string_view context) {
  if (!v.is_object() && !v.is_null()) (void)at(v, key, context);  // the not-an-object error
  const Value* member = find(v, key);
  if (member == nullptr || member->is_null()) return fallback;
  return as<T>(*member, detail::describe_key(key, context));
}

}  // namespace linea::json
