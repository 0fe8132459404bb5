// Around nlohmann's parser and writer: values built from its SAX events (so that a key used twice
// and deep nesting are caught where they occur), its errors turned into linea::Error with the
// line, the column and what was expected, and the typed reads of json.h.
#include "nn/json.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <unordered_set>

namespace linea::json {

namespace {

// Deeper nesting than this is refused: dump (nlohmann's serializer) recurses once per level.
constexpr size_t kMaxDepth = 512;

// The text as nlohmann's parser reads it, one byte at a time, remembering how far it has read:
// SAX callbacks are not told where they are, and the errors raised in them must say.
struct CountingReader {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  const char* at;
  const char** furthest;

  const char& operator*() const { return *at; }
  CountingReader& operator++() {
    *furthest = ++at;
    return *this;
  }
  bool operator==(const CountingReader& other) const { return at == other.at; }
};

// An exception's message without nlohmann's tag ("[json.exception.type_error.316] ").
std::string words_of(const Value::exception& e) {
  const std::string message = e.what();
  const size_t tag_end = message.rfind("] ", message.find(' '));
  return tag_end == std::string::npos ? message : message.substr(tag_end + 2);
}

// The opening quote of the string whose closing quote is at `close`: the first '"' before it that
// no odd run of backslashes escapes.
size_t string_start(std::string_view text, size_t close) {
  for (size_t i = close; i-- > 0;) {
    if (text[i] != '"') continue;
    size_t slashes = 0;
    while (slashes < i && text[i - 1 - slashes] == '\\') ++slashes;
    if (slashes % 2 == 0) return i;
  }
  return 0;
}

constexpr const char* kExpectedValue = "expected a value (an object, array, string, number, true, false or null)";

// nlohmann's reasons (fragments of its messages) as linea phrases them: what was expected. Errors
// inside a token first; then what the parser wanted next, which nlohmann appends ("...; expected
// ']'") also when the next token did not scan ("[] x": an invalid literal where the end was due).
struct Phrase {
  const char* nlohmann;
  const char* linea;
};
constexpr Phrase kPhrases[] = {
    {"missing closing quote", "expected a closing '\"' for the string starting here"},
    {"control character", "expected a character of a string (control characters must be escaped)"},
    {"forbidden character after backslash", "expected one of the escapes \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX"},
    {"must be followed by 4 hex digits", "expected four hex digits after \\u"},
    {"U+D800..U+DBFF must be followed by",
     "expected the low half of a surrogate pair after a high surrogate (a low surrogate, \\uDC00 to \\uDFFF)"},
    {"U+DC00..U+DFFF must follow", "expected a high surrogate before a low one"},
    {"ill-formed UTF-8", "expected valid UTF-8 in a string"},
    {"invalid BOM", "expected a UTF-8 byte order mark (EF BB BF) or none"},
    {"expected digit after '-'", "expected a digit"},
    {"expected digit after '.'", "expected a digit after '.'"},
    {"after exponent", "expected a digit in the exponent"},
    {"number overflow", "expected a number within the range of a double"},
    {"; expected '[', '{', or a literal", kExpectedValue},
    {"attempting to parse an empty input", kExpectedValue},  // nlohmann 3.12's words for "" (3.11: the line above)
    {"; expected string literal", "expected a string key"},
    {"; expected ':'", "expected ':' after an object key"},
    {"; expected '}'", "expected ',' or '}' after an object member"},
    {"; expected ']'", "expected ',' or ']' after an array element"},
    {"; expected end of input", "expected the end of the input after the value"},
};

// Builds the value from nlohmann's SAX events (the interface of nlohmann::json_sax). Members are
// appended to the object's vector directly: ordered_json's own insertion looks for the key first,
// which would make parsing an object of n keys (a vocabulary, a safetensors header) O(n^2); the
// check for repeated keys uses a hash set per open object instead.
class Builder {
 public:
  Builder(std::string_view text, std::string_view source, int64_t first_line, const char* const& furthest)
      : text_(text), source_(source), first_line_(first_line), furthest_(furthest) {}

  Value result;

  bool null() { return add(nullptr); }
  bool boolean(bool b) { return add(b); }
  bool number_integer(Value::number_integer_t i) { return add(i); }
  bool number_unsigned(Value::number_unsigned_t u) { return add(u); }
  bool number_float(Value::number_float_t d, const std::string&) { return add(d); }
  bool string(std::string& s) { return add(std::move(s)); }
  bool binary(Value::binary_t& b) { return add(Value::binary(std::move(b))); }  // not in JSON text

  bool start_object(size_t) {
    open(Value::object());
    keys_.emplace_back();
    return true;
  }
  bool key(std::string& key) {
    if (!keys_.back().insert(key).second)
      error_at(string_start(text_, consumed() - 1), "expected a key not used before in this object");
    auto& members = static_cast<Value::object_t::Container&>(open_.back()->get_ref<Value::object_t&>());
    member_ = &members.emplace_back(std::move(key), nullptr).second;
    return true;
  }
  bool end_object() {
    keys_.pop_back();
    open_.pop_back();
    return true;
  }
  bool start_array(size_t) {
    open(Value::array());
    return true;
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }

  // position: nlohmann's count of bytes read, the end of the input counting as one; the last one
  // read is where it found the error (for an unexpected token, the token's last byte).
  bool parse_error(size_t position, const std::string& last_token, const Value::exception& e) {
    // Without the text it quotes ("; last read: '...'"), the message holds only nlohmann's words.
    std::string message = words_of(e);
    if (const size_t quote = message.find("; last read: '" + last_token + "'"); quote != std::string::npos)
      message.erase(quote, last_token.size() + 15);
    const auto says = [&](const char* fragment) { return message.find(fragment) != std::string::npos; };
    size_t at = std::min(position, text_.size() + 1) - 1;
    if (says("missing closing quote")) at -= std::min(at, last_token.size());  // the string's opening quote
    else if (says("unexpected ") || says("number overflow")) at = token_start(at, last_token);
    if (says("unexpected number") && at > 0 && text_[at - 1] == '0')
      error_at(at, "expected no leading zero in a number");  // "01" scans as 0, then 1
    for (const Phrase& phrase : kPhrases)
      if (says(phrase.nlohmann)) error_at(at, phrase.linea);
    if (says("invalid literal")) {
      // Where a value was due: a word starting with t, f or n was meant to be a literal.
      size_t word = at;
      while (word > 0 && std::isalpha(static_cast<unsigned char>(text_[word - 1]))) --word;
      const char first = word < at ? text_[word] : '\0';
      error_at(at, first == 't'   ? "expected 'true'"
                   : first == 'f' ? "expected 'false'"
                   : first == 'n' ? "expected 'null'"
                                  : kExpectedValue);
    }
    const size_t reason = message.find(" - ");  // after nlohmann's own (byte-counting) position
    fail("json", position_of(at), ": ", message.substr(reason == std::string::npos ? 0 : reason + 3));
  }

 private:
  size_t consumed() const { return static_cast<size_t>(furthest_ - text_.data()); }

  // The first byte of the complete token that ends at `last`: a string, a number (whose text
  // nlohmann keeps in last_token), a literal, or one structural character.
  size_t token_start(size_t last, const std::string& last_token) const {
    if (last >= text_.size()) return last;  // the end of the input
    const auto c = static_cast<unsigned char>(text_[last]);
    if (c == '"') return string_start(text_, last);
    if (std::isdigit(c)) return last + 1 - std::min(last + 1, last_token.size());
    if (!std::isalpha(c)) return last;
    size_t start = last;
    while (start > 0 && std::isalpha(static_cast<unsigned char>(text_[start - 1]))) --start;
    return start;
  }

  // "run.json, line 3, column 14"; columns count bytes from 1.
  std::string position_of(size_t at) const {
    int64_t line = first_line_, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return std::string(source_) + (source_.empty() ? "" : ", ") + "line " + std::to_string(line) + ", column " +
           std::to_string(column);
  }

  std::string describe(size_t at) const {
    if (at >= text_.size()) return "the end of the input";
    const auto c = static_cast<unsigned char>(text_[at]);
    if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    char byte[16];
    std::snprintf(byte, sizeof byte, "byte 0x%02x", c);
    return byte;
  }

  [[noreturn]] void error_at(size_t at, const std::string& expected) const {
    fail("json", position_of(at), ": ", expected, ", got ", describe(at));
  }

  // Where the next value goes: the top, the end of the open array, or the member just keyed.
  Value* place(Value v) {
    if (open_.empty()) return &(result = std::move(v));
    if (open_.back()->is_array()) {
      auto& elements = open_.back()->get_ref<Value::array_t&>();
      elements.push_back(std::move(v));
      return &elements.back();
    }
    return &(*member_ = std::move(v));
  }
  bool add(Value v) {
    place(std::move(v));
    return true;
  }
  void open(Value container) {
    if (open_.size() >= kMaxDepth)
      error_at(consumed() - 1, "expected nesting of at most " + std::to_string(kMaxDepth) + " arrays and objects");
    // Pointers into the open containers stay valid: only the innermost one grows.
    open_.push_back(place(std::move(container)));
  }

  std::string_view text_;
  std::string_view source_;
  int64_t first_line_;
  const char* const& furthest_;
  std::vector<Value*> open_;
  std::vector<std::unordered_set<std::string>> keys_;  // of each open object
  Value* member_ = nullptr;
};

Value parse_from(std::string_view text, std::string_view source, int64_t first_line) {
  const char* furthest = text.data();
  Builder builder(text, source, first_line, furthest);
  const CountingReader begin{text.data(), &furthest}, end{text.data() + text.size(), &furthest};
  Value::sax_parse(begin, end, &builder);  // errors throw from the builder
  return std::move(builder.result);
}

}  // namespace

Value parse(std::string_view text, std::string_view source) { return parse_from(text, source, 1); }

std::vector<Value> parse_lines(std::string_view text, std::string_view source) {
  std::vector<Value> out;
  int64_t line = 1;
  for (size_t start = 0; start < text.size(); ++line) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view content = text.substr(start, end - start);
    if (content.find_first_not_of(" \t\r") != std::string_view::npos) out.push_back(parse_from(content, source, line));
    start = end + 1;
  }
  return out;
}

std::string dump(const Value& v, int indent) {
  try {
    return v.dump(indent);
  } catch (const Value::type_error& e) {  // 316: a string that is not UTF-8
    fail("json", "cannot write a string that is not valid UTF-8: ", words_of(e));
  }
}

const Value* find(const Value& v, std::string_view key) {
  if (!v.is_object()) return nullptr;
  const auto it = v.find(key);
  return it == v.end() ? nullptr : &*it;
}

const Value& at(const Value& v, std::string_view key, std::string_view context) {
  if (!v.is_object())
    fail("json", context, context.empty() ? "" : ": ", "expected an object with key '", key, "', got ", v.type_name());
  if (const Value* member = find(v, key)) return *member;
  std::string present;
  for (const auto& [name, value] : v.items()) present += (present.empty() ? "'" : ", '") + name + "'";
  fail("json", detail::describe_key(key, context), " is missing (present: ", present.empty() ? "none" : present, ")");
}

const Value& at(const Value& v, size_t index) {
  if (!v.is_array()) fail("json", "expected an array, got ", v.type_name());
  if (index >= v.size()) fail("json", "index ", index, " is out of range for an array of ", v.size(), " elements");
  return v[index];
}

namespace detail {

void wrong_kind(const Value& v, std::string_view where, const char* expected) {
  fail("json", where, where.empty() ? "" : ": ", "expected ", expected, ", got ", v.type_name());
}

void out_of_range(const Value& v, std::string_view where, const std::string& low, const std::string& high) {
  fail("json", where, where.empty() ? "" : ": ", "expected an integer in [", low, ", ", high, "], got ", dump(v));
}

int64_t read_int64(const Value& v, std::string_view where) {
  if (!v.is_number()) wrong_kind(v, where, "an integer");
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_unsigned()) out_of_range(v, where, std::to_string(INT64_MIN), std::to_string(INT64_MAX));
  // A double with an integral value in range; 2^63 is exactly representable, so the test is exact.
  const double d = v.get<double>();
  if (!(std::trunc(d) == d && d >= -9223372036854775808.0 && d < 9223372036854775808.0))
    fail("json", where, where.empty() ? "" : ": ", "expected an integer, got ", dump(v));
  return static_cast<int64_t>(d);
}

std::string describe_key(std::string_view key, std::string_view context) {
  return std::string(context) + (context.empty() ? "" : " ") + "key '" + std::string(key) + "'";
}

}  // namespace detail

}  // namespace linea::json
