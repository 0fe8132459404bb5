#pragma once
// Numbers as text, exactly, for everything that reads or writes them outside JSON (command-line
// flags, device names, checkpoint metadata, tokenizer files): the shortest text that reads back
// to the same value, and a parse that takes the whole text or nothing. std::to_chars and
// std::from_chars underneath: no locale, no leading '+' or whitespace.
#include <charconv>
#include <string>
#include <string_view>
#include <system_error>

namespace linea {

// 3e-04 rather than 0.00029999999999999997, 0.9 for the float 0.9f, an integer as its digits.
template <class T>
std::string shortest_text(T value) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

// Reads the number that the whole of `text` spells into value: std::errc() on success,
// std::errc::result_out_of_range for a number beyond T, std::errc::invalid_argument for anything
// else ("", "12abc", "1.5" for an integer T). value is left as it was on failure.
template <class T>
std::errc parse_whole_number(std::string_view text, T& value) {
  T parsed{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, parsed);
  if (error != std::errc()) return error;
  if (stop != end) return std::errc::invalid_argument;
  value = parsed;
  return std::errc();
}

}  // namespace linea
