#include "train/utf8.h"

namespace linea::train::utf8 {

int32_t next(std::string_view text, size_t& pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  // The lead byte fixes the length and the smallest code point that needs it (anything smaller
  // is an overlong form, a classic way to smuggle '/' or NUL past filters).
  int length;
  char32_t value, minimum;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, value = lead & 0x1F, minimum = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, value = lead & 0x0F, minimum = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, value = lead & 0x07, minimum = 0x10000;
  } else {
    ++pos;
    return kInvalid;
  }
  if (pos + length > text.size()) {
    ++pos;
    return kInvalid;
  }
  for (int i = 1; i < length; ++i) {
    const unsigned char continuation = byte(pos + i);
    if ((continuation & 0xC0) != 0x80) {
      ++pos;
      return kInvalid;
    }
    value = (value << 6) | (continuation & 0x3F);
  }
  if (value < minimum || !is_code_point(value)) {
    ++pos;
    return kInvalid;
  }
  pos += length;
  return static_cast<int32_t>(value);
}

void append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool is_code_point(int64_t value) { return value >= 0 && value <= 0x10FFFF && !(value >= 0xD800 && value <= 0xDFFF); }

size_t first_invalid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    if (next(text, pos) == kInvalid) return start;
  }
  return std::string_view::npos;
}

}  // namespace linea::train::utf8
