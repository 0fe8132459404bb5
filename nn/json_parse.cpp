// Reading JSON: a recursive-descent parser over the bytes of the text. Every way the input can
// be wrong (truncated, random bytes, invalid UTF-8, nesting deeper than any config) ends in a
// linea::Error naming the line, the column and what was expected; nothing reads past the end.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "nn/json.h"

namespace linea::json {

namespace detail {

size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  auto continuation = [&](size_t k) { return (byte(k) & 0xC0u) == 0x80u; };
  const unsigned c = byte(0);
  if (i >= s.size()) return 0;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return continuation(1) ? 2 : 0;
  // The second byte's range excludes overlong forms (E0, F0), UTF-16 surrogates (ED) and code
  // points above U+10FFFF (F4).
  const unsigned c1 = byte(1);
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned low = c == 0xE0 ? 0xA0 : 0x80, high = c == 0xED ? 0x9F : 0xBF;
    return c1 >= low && c1 <= high && continuation(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned low = c == 0xF0 ? 0x90 : 0x80, high = c == 0xF4 ? 0x8F : 0xBF;
    return c1 >= low && c1 <= high && continuation(2) && continuation(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace detail

namespace {

// Deeper nesting than this is refused: recursion (here and in Value's destructor) stays shallow.
constexpr int kMaxDepth = 512;

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Parser {
 public:
  Parser(std::string_view text, std::string_view source, int64_t first_line)
      : text_(text), source_(source), first_line_(first_line) {}

  Value document() {
    skip_whitespace();
    Value v = value(0);
    skip_whitespace();
    if (pos_ < text_.size()) error("expected the end of the input after the value");
    return v;
  }

 private:
  // "line 3, column 14: expected ..., got 'x'"; the column counts bytes from 1.
  [[noreturn]] void error_at(size_t at, const std::string& expected) const {
    int64_t line = first_line_, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    fail("json", source_, source_.empty() ? "" : ", ", "line ", line, ", column ", column, ": ", expected, ", got ",
         describe(at));
  }
  [[noreturn]] void error(const std::string& expected) const { error_at(pos_, expected); }

  std::string describe(size_t at) const {
    if (at >= text_.size()) return "the end of the input";
    const auto c = static_cast<unsigned char>(text_[at]);
    if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  void expect(char c, const char* what) {
    if (peek() != c || at_end()) error(what);
    ++pos_;
  }

  bool consume_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value value(int depth) {
    if (depth >= kMaxDepth) error("nesting of at most " + std::to_string(kMaxDepth) + " arrays and objects");
    switch (peek()) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': return Value(string());
      case 't': return literal("true", Value(true));
      case 'f': return literal("false", Value(false));
      case 'n': return literal("null", Value());
      case 'N': return literal("NaN", Value(std::numeric_limits<double>::quiet_NaN()));
      case 'I': return literal("Infinity", Value(std::numeric_limits<double>::infinity()));
      default:
        if (!at_end() && (peek() == '-' || is_digit(peek()))) return number();
        error("expected a value (an object, array, string, number, true, false or null)");
    }
  }

  Value literal(std::string_view word, Value v) {
    if (!consume_word(word)) error("expected '" + std::string(word) + "'");
    return v;
  }

  Value object(int depth) {
    ++pos_;  // '{'
    Object members;
    skip_whitespace();
    if (peek() == '}' && !at_end()) {
      ++pos_;
      return Value(std::move(members));
    }
    while (true) {
      skip_whitespace();
      const size_t key_at = pos_;
      if (peek() != '"' || at_end()) error("expected a string key");
      std::string key = string();
      if (members.contains(key)) error_at(key_at, "expected a key not used before in this object");
      skip_whitespace();
      expect(':', "expected ':' after an object key");
      skip_whitespace();
      members.set(std::move(key), value(depth + 1));
      skip_whitespace();
      if (peek() == '}' && !at_end()) break;
      expect(',', "expected ',' or '}' after an object member");
    }
    ++pos_;
    return Value(std::move(members));
  }

  Value array(int depth) {
    ++pos_;  // '['
    Array elements;
    skip_whitespace();
    if (peek() == ']' && !at_end()) {
      ++pos_;
      return Value(std::move(elements));
    }
    while (true) {
      skip_whitespace();
      elements.push_back(value(depth + 1));
      skip_whitespace();
      if (peek() == ']' && !at_end()) break;
      expect(',', "expected ',' or ']' after an array element");
    }
    ++pos_;
    return Value(std::move(elements));
  }

  std::string string() {
    const size_t start = pos_++;  // '"'
    std::string out;
    while (true) {
      if (at_end()) error_at(start, "expected a closing '\"' for the string starting here");
      const auto c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c == '\\') {
        escape(out);
      } else if (c < 0x20) {
        error("expected a character of a string (control characters must be escaped)");
      } else {
        const size_t n = detail::utf8_sequence_length(text_, pos_);
        if (n == 0) error("expected valid UTF-8 in a string");
        out.append(text_.substr(pos_, n));
        pos_ += n;
      }
    }
  }

  void escape(std::string& out) {
    ++pos_;  // '\'
    const char e = peek();
    if (at_end()) error("expected an escape character after '\\'");
    ++pos_;
    switch (e) {
      case '"': out += '"'; return;
      case '\\': out += '\\'; return;
      case '/': out += '/'; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'n': out += '\n'; return;
      case 'r': out += '\r'; return;
      case 't': out += '\t'; return;
      case 'u': break;
      default:
        --pos_;
        error("expected one of the escapes \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX");
    }
    uint32_t cp = hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) error_at(pos_ - 6, "expected a high surrogate before a low one");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      // A code point above U+FFFF is written as a UTF-16 pair \uD8xx\uDCxx.
      if (!consume_word("\\u")) error("expected '\\u' and the low half of a surrogate pair");
      const uint32_t low = hex4();
      if (low < 0xDC00 || low > 0xDFFF) error_at(pos_ - 4, "expected a low surrogate (\\uDC00 to \\uDFFF)");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, cp);
  }

  uint32_t hex4() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = peek();
      uint32_t digit;
      if (is_digit(c)) digit = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') digit = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') digit = static_cast<uint32_t>(c - 'A' + 10);
      else error("expected four hex digits after \\u");
      v = v * 16 + digit;
      ++pos_;
    }
    return v;
  }

  void digits(const char* what) {
    if (at_end() || !is_digit(peek())) error(what);
    while (!at_end() && is_digit(peek())) ++pos_;
  }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, or -Infinity.
  Value number() {
    const size_t start = pos_;
    if (peek() == '-') {
      ++pos_;
      if (peek() == 'I') return literal("Infinity", Value(-std::numeric_limits<double>::infinity()));
    }
    const size_t int_start = pos_;
    if (peek() == '0') {
      ++pos_;
      if (!at_end() && is_digit(peek())) error("expected no leading zero in a number");
    } else {
      digits("expected a digit");
    }
    const size_t int_end = pos_;
    size_t frac_start = pos_, frac_end = pos_;
    if (peek() == '.') {
      ++pos_;
      frac_start = pos_;
      digits("expected a digit after '.'");
      frac_end = pos_;
    }
    bool has_exponent = false;
    if (peek() == 'e' || peek() == 'E') {
      has_exponent = true;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      digits("expected a digit in the exponent");
    }
    const std::string_view text = text_.substr(start, pos_ - start);
    const bool integral = frac_start == frac_end && !has_exponent;
    // "-0" is a double: an int64 has no negative zero.
    if (integral && text != "-0") {
      int64_t i = 0;
      const auto r = std::from_chars(text.data(), text.data() + text.size(), i);
      if (r.ec == std::errc()) return Value(i);  // else too large for int64: read as a double
    }
    double d = 0.0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), d);
    if (r.ec == std::errc::result_out_of_range) {
      if (decimal_magnitude(int_start, int_end, frac_start, frac_end) > 0) error_at(start, "expected a number within the range of a double");
      d = text[0] == '-' ? -0.0 : 0.0;  // underflow: the nearest double is zero
    }
    return Value(d);
  }

  // Roughly log10 of a literal's magnitude, enough to tell an overflow from an underflow.
  int64_t decimal_magnitude(size_t int_start, size_t int_end, size_t frac_start, size_t frac_end) const {
    int64_t exponent = 0;
    size_t e = frac_end;
    if (e < pos_ && (text_[e] == 'e' || text_[e] == 'E')) {
      ++e;
      const bool negative = text_[e] == '-';
      if (text_[e] == '+' || text_[e] == '-') ++e;
      for (; e < pos_; ++e) exponent = std::min<int64_t>(exponent * 10 + (text_[e] - '0'), int64_t{1} << 40);
      if (negative) exponent = -exponent;
    }
    if (text_[int_start] != '0') return exponent + static_cast<int64_t>(int_end - int_start);
    for (size_t i = frac_start; i < frac_end; ++i)
      if (text_[i] != '0') return exponent - static_cast<int64_t>(i - frac_start);
    return 0;
  }

  std::string_view text_;
  std::string_view source_;
  int64_t first_line_;
  size_t pos_ = 0;
};

}  // namespace

Value parse(std::string_view text, std::string_view source) { return Parser(text, source, 1).document(); }

std::vector<Value> parse_lines(std::string_view text, std::string_view source) {
  std::vector<Value> out;
  int64_t line = 1;
  for (size_t start = 0; start < text.size(); ++line) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view content = text.substr(start, end - start);
    if (content.find_first_not_of(" \t\r") != std::string_view::npos)
      out.push_back(Parser(content, source, line).document());
    start = end + 1;
  }
  return out;
}

}  // namespace linea::json
