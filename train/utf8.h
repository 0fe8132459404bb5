#pragma once
// UTF-8, strictly as RFC 3629 defines it: no overlong forms, no surrogates (U+D800..U+DFFF),
// nothing above U+10FFFF. The char tokenizer works in code points; the corpus readers use
// first_invalid_utf8 to reject text the char tokenizer cannot represent.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace linea::train::utf8 {

inline constexpr int32_t kInvalid = -1;
inline constexpr char32_t kReplacement = 0xFFFD;  // what decoders show for an unrepresentable char

// The code point starting at text[pos], advancing pos past it. An invalid or truncated sequence
// yields kInvalid and advances pos by one byte, so every byte is consumed exactly once and a
// decoder can resynchronise on the next byte.
int32_t next(std::string_view text, size_t& pos);

// Appends the UTF-8 encoding of a valid code point.
void append(std::string& out, char32_t code_point);

bool is_code_point(int64_t value);  // in [0, 0x10FFFF] and not a surrogate

// Byte offset of the first invalid sequence, or npos when text is valid UTF-8.
size_t first_invalid(std::string_view text);

}  // namespace linea::train::utf8
