#pragma once
// A small JSON value type for model configs, JSONL training logs and checkpoint metadata.
//
//   json::Value cfg = json::parse(text);            // linea::Error with line and column on bad input
//   int64_t d = cfg.get<int64_t>("d_model", "config");
//   //   -> "linea.json: config key 'd_model': expected an integer, got string"
//   double p = cfg.get_or<double>("dropout", 0.0);
//   std::string line = record.dump();               // one line: a JSONL record
//
// Numbers keep two kinds: an integer literal that fits int64 stays an exact int64 (step counts,
// seeds, token counts survive beyond 2^53), anything else is a double. dump() writes a double's
// shortest round-trip digits laid out as Python's repr (0.0003, 1e-05, 3.0), always with a '.'
// or an exponent, so parse(dump(v)) == v holds kind for kind.
//
// One deliberate departure from RFC 8259, as in Python's json module: NaN, Infinity and -Infinity
// are written and read (a diverged loss must reach the log, not abort the trainer). Objects keep
// their members in insertion order (dump is stable and diffable); duplicate keys are an error
// when parsing, because in a config they are always a mistake.
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "tensor/error.h"

namespace linea::json {

class Value;

// Members in insertion order, with a hash index from key to position: a safetensors header or a
// tokenizer's vocabulary has tens of thousands of keys. Keys are const so the index stays right.
class Object {
 public:
  using Member = std::pair<const std::string, Value>;

  Object() = default;
  Object(const Object&) = default;
  Object(Object&&) noexcept = default;
  // By copy and move: members cannot be assigned one by one, their keys being const.
  Object& operator=(const Object& other) { return *this = Object(other); }
  Object& operator=(Object&&) noexcept = default;

  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // Replaces the value of an existing key in place (keeping its position), else appends.
  Value& set(std::string key, Value value);
  // The value of key, inserting null at the end when absent.
  Value& operator[](std::string_view key);
  bool erase(std::string_view key);  // O(size): later members move up

  size_t size() const { return members_.size(); }
  bool empty() const { return members_.empty(); }
  std::vector<Member>::const_iterator begin() const { return members_.begin(); }
  std::vector<Member>::const_iterator end() const { return members_.end(); }
  std::vector<Member>::iterator begin() { return members_.begin(); }
  std::vector<Member>::iterator end() { return members_.end(); }

 private:
  struct KeyHash {
    using is_transparent = void;  // lookups by string_view without a temporary std::string
    size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
  };
  std::vector<Member> members_;
  std::unordered_map<std::string, size_t, KeyHash, std::equal_to<>> index_;
};

using Array = std::vector<Value>;

enum class Kind { Null, Bool, Number, String, Array, Object };
const char* kind_name(Kind kind);  // "null", "bool", "number", ...

class Value {
 public:
  Value() = default;  // null
  Value(std::nullptr_t) {}
  Value(bool b) : data_(b) {}
  Value(double d) : data_(d) {}
  Value(float f) : data_(static_cast<double>(f)) {}
  // Every integer type except bool; an unsigned value above INT64_MAX is an error.
  template <class I>
    requires(std::is_integral_v<I> && !std::is_same_v<I, bool> && !std::is_same_v<I, char>)
  Value(I i) : data_(checked_int(i)) {}
  Value(const char* s) : data_(std::string(s)) {}
  Value(std::string_view s) : data_(std::string(s)) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(Array a) : data_(std::move(a)) {}
  Value(Object o) : data_(std::move(o)) {}

  Kind kind() const;
  bool is_null() const { return kind() == Kind::Null; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_number() const { return kind() == Kind::Number; }
  bool is_integer() const { return std::holds_alternative<int64_t>(data_); }  // an exact int64
  bool is_string() const { return kind() == Kind::String; }
  bool is_array() const { return kind() == Kind::Array; }
  bool is_object() const { return kind() == Kind::Object; }

  // Typed reads; the wrong kind is an Error "expected a number, got string".
  bool as_bool() const;
  double as_double() const;  // any number
  int64_t as_int64() const;  // an int64, or a double with an integral value in range
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Object access. at() names the missing key and the keys present; operator[] turns a null
  // into an object and inserts null for a new key, for building records.
  const Value& at(std::string_view key) const;
  const Value* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  Value& operator[](std::string_view key);
  Value& operator[](const char* key) { return (*this)[std::string_view(key)]; }
  // Array access (bounds checked) and append (a null becomes an empty array).
  const Value& at(size_t index) const;
  void push_back(Value v);
  size_t size() const;  // members of an object, elements of an array; 0 otherwise

  // Typed member reads; `context` names what the object is in the error:
  //   get<int64_t>("d_model", "config") -> "config key 'd_model': expected an integer, got string".
  // T is bool, a signed or unsigned integer type (range-checked), float, double or std::string.
  template <class T>
  T get(std::string_view key, std::string_view context = {}) const;
  // As get, with fallback when the key is absent or null; a present key of the wrong kind fails.
  template <class T>
  T get_or(std::string_view key, T fallback, std::string_view context = {}) const;

  // indent < 0: one line, no spaces (a JSONL record); indent >= 0: one member or element per
  // line, nested by indent spaces.
  std::string dump(int indent = -1) const;

  // Structural equality: numbers compare by value (1 == 1.0, NaN == NaN), objects ignore order.
  friend bool operator==(const Value& a, const Value& b);

 private:
  template <class I>
  static int64_t checked_int(I i) {
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(int64_t))
      if (i > static_cast<I>(INT64_MAX)) fail("json", "integer ", i, " does not fit in int64");
    return static_cast<int64_t>(i);
  }
  const Value& member(std::string_view key, std::string_view context) const;  // at() with context

  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> data_;
};

// Parses one JSON text (any value at the top, surrounded by whitespace). Errors name the line,
// the column and what was expected: "linea.json: line 3, column 14: expected ',' or '}' after an
// object member, got 'x'". `source` (a file name), when given, prefixes the position.
Value parse(std::string_view text, std::string_view source = {});
// One value per non-blank line (JSONL); errors name the line of the file.
std::vector<Value> parse_lines(std::string_view text, std::string_view source = {});

// Reads a file / writes v.dump(indent) and a newline; errors name the path.
Value read_file(const std::string& path);
void write_file(const std::string& path, const Value& v, int indent = 2);

}  // namespace linea::json

// ---- template definitions ----
namespace linea::json {

namespace detail {
// Typed reads that prefix errors with `where` ("config key 'd_model'"), shared by as_*, get, get_or.
bool read_bool(const Value& v, std::string_view where);
int64_t read_int(const Value& v, std::string_view where);
double read_double(const Value& v, std::string_view where);
const std::string& read_string(const Value& v, std::string_view where);
std::string describe_key(std::string_view key, std::string_view context);
[[noreturn]] void fail_range(int64_t value, std::string_view where, const std::string& low, const std::string& high);
// Bytes in the well-formed UTF-8 sequence starting at s[i] (no overlongs, no surrogates, at most
// U+10FFFF), or 0 when there is none; the reader and the writer both check strings with it.
size_t utf8_sequence_length(std::string_view s, size_t i);

template <class T>
T read(const Value& v, std::string_view where) {
  if constexpr (std::is_same_v<T, bool>) {
    return read_bool(v, where);
  } else if constexpr (std::is_integral_v<T>) {
    const int64_t i = read_int(v, where);
    using Limits = std::numeric_limits<T>;
    const bool below = std::is_unsigned_v<T> ? i < 0 : i < static_cast<int64_t>(Limits::min());
    const bool above = i >= 0 && static_cast<uint64_t>(i) > static_cast<uint64_t>(Limits::max());
    if (below || above) fail_range(i, where, std::to_string(Limits::min()), std::to_string(Limits::max()));
    return static_cast<T>(i);
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(read_double(v, where));
  } else {
    static_assert(std::is_same_v<T, std::string>, "json get<T>: T must be bool, an integer, a float or std::string");
    return read_string(v, where);
  }
}
}  // namespace detail

template <class T>
T Value::get(std::string_view key, std::string_view context) const {
  return detail::read<T>(member(key, context), detail::describe_key(key, context));
}

template <class T>
T Value::get_or(std::string_view key, T fallback, std::string_view context) const {
  if (!is_object() && !is_null()) (void)member(key, context);  // the not-an-object error
  const Value* v = find(key);
  if (v == nullptr || v->is_null()) return fallback;
  return detail::read<T>(*v, detail::describe_key(key, context));
}

}  // namespace linea::json
