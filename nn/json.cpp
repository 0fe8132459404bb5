// The JSON value: typed access with errors that say what was expected, equality, and writing.
// Reading lives in json_parse.cpp.
#include "nn/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace linea::json {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::Null: return "null";
    case Kind::Bool: return "bool";
    case Kind::Number: return "number";
    case Kind::String: return "string";
    case Kind::Array: return "array";
    case Kind::Object: return "object";
  }
  return "?";
}

// ---- Object ----

const Value* Object::find(std::string_view key) const {
  const auto it = index_.find(key);
  return it == index_.end() ? nullptr : &members_[it->second].second;
}

Value* Object::find(std::string_view key) { return const_cast<Value*>(std::as_const(*this).find(key)); }

Value& Object::set(std::string key, Value value) {
  if (Value* existing = find(key)) return *existing = std::move(value);
  index_.emplace(key, members_.size());
  members_.emplace_back(std::move(key), std::move(value));
  return members_.back().second;
}

Value& Object::operator[](std::string_view key) {
  if (Value* existing = find(key)) return *existing;
  return set(std::string(key), Value());
}

bool Object::erase(std::string_view key) {
  if (!contains(key)) return false;
  // Members' keys are const, so the survivors are rebuilt rather than shifted.
  std::vector<Member> kept;
  index_.clear();
  for (Member& m : members_) {
    if (m.first == key) continue;
    index_.emplace(m.first, kept.size());
    kept.emplace_back(m.first, std::move(m.second));
  }
  members_ = std::move(kept);
  return true;
}

// ---- typed access ----

namespace detail {

namespace {
[[noreturn]] void wrong_kind(const Value& v, std::string_view where, const char* expected) {
  fail("json", where, where.empty() ? "" : ": ", "expected ", expected, ", got ", kind_name(v.kind()));
}
}  // namespace

bool read_bool(const Value& v, std::string_view where) {
  if (!v.is_bool()) wrong_kind(v, where, "a bool");
  return v.as_bool();
}

double read_double(const Value& v, std::string_view where) {
  if (!v.is_number()) wrong_kind(v, where, "a number");
  return v.as_double();
}

int64_t read_int(const Value& v, std::string_view where) {
  if (!v.is_number()) wrong_kind(v, where, "an integer");
  if (v.is_integer()) return v.as_int64();
  // 2^63 is exactly representable, so the range test is exact.
  const double d = v.as_double();
  if (!(std::trunc(d) == d && d >= -9223372036854775808.0 && d < 9223372036854775808.0))
    fail("json", where, where.empty() ? "" : ": ", "expected an integer, got ", Value(d).dump());
  return static_cast<int64_t>(d);
}

const std::string& read_string(const Value& v, std::string_view where) {
  if (!v.is_string()) wrong_kind(v, where, "a string");
  return v.as_string();
}

std::string describe_key(std::string_view key, std::string_view context) {
  return std::string(context) + (context.empty() ? "" : " ") + "key '" + std::string(key) + "'";
}

void fail_range(int64_t value, std::string_view where, const std::string& low, const std::string& high) {
  fail("json", where, ": expected an integer in [", low, ", ", high, "], got ", value);
}

}  // namespace detail

Kind Value::kind() const {
  switch (data_.index()) {
    case 0: return Kind::Null;
    case 1: return Kind::Bool;
    case 2:
    case 3: return Kind::Number;
    case 4: return Kind::String;
    case 5: return Kind::Array;
    default: return Kind::Object;
  }
}

bool Value::as_bool() const {
  if (!is_bool()) detail::read_bool(*this, {});
  return std::get<bool>(data_);
}

double Value::as_double() const {
  if (const auto* i = std::get_if<int64_t>(&data_)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&data_)) return *d;
  return detail::read_double(*this, {});
}

int64_t Value::as_int64() const {
  if (const auto* i = std::get_if<int64_t>(&data_)) return *i;
  return detail::read_int(*this, {});
}

const std::string& Value::as_string() const {
  if (!is_string()) detail::read_string(*this, {});
  return std::get<std::string>(data_);
}

const Array& Value::as_array() const {
  if (!is_array()) fail("json", "expected an array, got ", kind_name(kind()));
  return std::get<Array>(data_);
}

Array& Value::as_array() { return const_cast<Array&>(std::as_const(*this).as_array()); }

const Object& Value::as_object() const {
  if (!is_object()) fail("json", "expected an object, got ", kind_name(kind()));
  return std::get<Object>(data_);
}

Object& Value::as_object() { return const_cast<Object&>(std::as_const(*this).as_object()); }

const Value* Value::find(std::string_view key) const { return is_object() ? as_object().find(key) : nullptr; }

const Value& Value::member(std::string_view key, std::string_view context) const {
  if (!is_object())
    fail("json", context, context.empty() ? "" : ": ", "expected an object with key '", key, "', got ",
         kind_name(kind()));
  if (const Value* v = find(key)) return *v;
  std::string present;
  for (const auto& [name, value] : as_object()) present += (present.empty() ? "'" : ", '") + name + "'";
  fail("json", detail::describe_key(key, context), " is missing (present: ", present.empty() ? "none" : present, ")");
}

const Value& Value::at(std::string_view key) const { return member(key, {}); }

Value& Value::operator[](std::string_view key) {
  if (is_null()) data_ = Object();
  return as_object()[key];
}

const Value& Value::at(size_t index) const {
  const Array& a = as_array();
  if (index >= a.size()) fail("json", "index ", index, " is out of range for an array of ", a.size(), " elements");
  return a[index];
}

void Value::push_back(Value v) {
  if (is_null()) data_ = Array();
  as_array().push_back(std::move(v));
}

size_t Value::size() const {
  if (is_array()) return as_array().size();
  if (is_object()) return as_object().size();
  return 0;
}

bool operator==(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Null: return true;
    case Kind::Bool: return a.as_bool() == b.as_bool();
    case Kind::Number: {
      if (a.is_integer() && b.is_integer()) return a.as_int64() == b.as_int64();
      const double x = a.as_double(), y = b.as_double();
      return x == y || (std::isnan(x) && std::isnan(y));
    }
    case Kind::String: return a.as_string() == b.as_string();
    case Kind::Array: return a.as_array() == b.as_array();
    case Kind::Object: {
      if (a.size() != b.size()) return false;
      for (const auto& [key, value] : a.as_object()) {
        const Value* other = b.find(key);
        if (other == nullptr || !(*other == value)) return false;
      }
      return true;
    }
  }
  return false;
}

// ---- writing ----

namespace {

// The shortest digits that read back to d (std::to_chars), laid out as Python's repr lays them
// out: positional for 1e-4 <= |d| < 1e16 with a ".0" on whole numbers, else d.ddde+XX. Either way
// the text reads back as a double, never as an integer.
void write_double(std::string& out, double d) {
  if (std::isnan(d)) return void(out += "NaN");
  if (std::isinf(d)) return void(out += d > 0 ? "Infinity" : "-Infinity");
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific).ptr;
  const std::string_view sci(buf, static_cast<size_t>(end - buf));  // "-1.2345e-05"
  const size_t e_at = sci.find('e');
  const int exponent = std::stoi(std::string(sci.substr(e_at + 1)));
  if (exponent < -4 || exponent >= 16) return void(out += sci);
  const bool negative = sci[0] == '-';
  std::string digits;
  for (char c : sci.substr(negative ? 1 : 0, e_at - (negative ? 1 : 0)))
    if (c != '.') digits += c;
  if (negative) out += '-';
  if (exponent < 0) {
    out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    return;
  }
  const size_t whole = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= whole) {
    out += digits + std::string(whole - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, whole) + "." + digits.substr(whole);
  }
}

// The length of the UTF-8 sequence at s[i]; bytes that are not UTF-8 cannot be written as JSON.
size_t check_utf8_sequence(std::string_view s, size_t i) {
  const size_t n = detail::utf8_sequence_length(s, i);
  if (n == 0) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(s[i]));
    fail("json", "cannot write a string that is not valid UTF-8: byte ", i, " is ", byte);
  }
  return n;
}

void write_string(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = check_utf8_sequence(s, i);
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

void newline(std::string& out, int indent, int depth) {
  if (indent < 0) return;
  out += '\n';
  out.append(static_cast<size_t>(indent) * static_cast<size_t>(depth), ' ');
}

void write(std::string& out, const Value& v, int indent, int depth) {
  switch (v.kind()) {
    case Kind::Null: out += "null"; break;
    case Kind::Bool: out += v.as_bool() ? "true" : "false"; break;
    case Kind::Number:
      if (v.is_integer())
        out += std::to_string(v.as_int64());
      else
        write_double(out, v.as_double());
      break;
    case Kind::String: write_string(out, v.as_string()); break;
    case Kind::Array: {
      out += '[';
      bool first = true;
      for (const Value& e : v.as_array()) {
        if (!first) out += ',';
        first = false;
        newline(out, indent, depth + 1);
        write(out, e, indent, depth + 1);
      }
      if (!first) newline(out, indent, depth);
      out += ']';
      break;
    }
    case Kind::Object: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : v.as_object()) {
        if (!first) out += ',';
        first = false;
        newline(out, indent, depth + 1);
        write_string(out, key);
        out += indent < 0 ? ":" : ": ";
        write(out, value, indent, depth + 1);
      }
      if (!first) newline(out, indent, depth);
      out += '}';
      break;
    }
  }
}

}  // namespace

std::string Value::dump(int indent) const {
  std::string out;
  write(out, *this, indent, 0);
  return out;
}

Value read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LINEA_CHECK(in, "json", "cannot open '", path, "' for reading");
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

void write_file(const std::string& path, const Value& v, int indent) {
  const std::string text = v.dump(indent) + "\n";  // before opening: a failed dump leaves no half file
  std::ofstream out(path, std::ios::binary);
  LINEA_CHECK(out, "json", "cannot open '", path, "' for writing");
  out << text;
  LINEA_CHECK(out.good(), "json", "failed writing '", path, "'");
}

}  // namespace linea::json
