#include "train/tokenizer_file.h"

#include "tensor/number_text.h"

namespace linea::train {

std::string_view TokenizerFileReader::line(const char* what) {
  ++line_number_;
  if (rest_.empty()) error("the file ends early: expected ", what);
  const size_t end = rest_.find('\n');
  // The body handed to the reader always ends in '\n' (the checksum line follows it).
  const std::string_view line = rest_.substr(0, end);
  rest_.remove_prefix(end == std::string_view::npos ? rest_.size() : end + 1);
  return line;
}

int64_t TokenizerFileReader::count(std::string_view key, int64_t max) {
  const std::string_view text = line(std::string(key).c_str());
  if (text.substr(0, key.size()) != key || text.size() <= key.size() || text[key.size()] != ' ')
    error("expected '", key, " <count>', found '", text.substr(0, 40), "'");
  return integer(text.substr(key.size() + 1), 0, max, std::string(key).c_str());
}

int64_t TokenizerFileReader::integer(std::string_view text, int64_t min, int64_t max, const char* what) {
  int64_t value = 0;
  if (parse_whole_number(text, value) != std::errc())
    error("expected an integer (", what, "), found '", text.substr(0, 40), "'");
  if (value < min || value > max) error(what, " ", value, " is outside [", min, ", ", max, "]");
  return value;
}

void TokenizerFileReader::finish() {
  if (!rest_.empty()) {
    ++line_number_;
    error("unexpected extra lines");
  }
}

}  // namespace linea::train
