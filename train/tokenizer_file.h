#pragma once
// Reading a saved tokenizer's body line by line. Every malformed, missing or out-of-range field
// becomes a linea::Error naming the file and the line, so each kind's parser stays a short list of
// expectations and a fuzzed file can never crash the loader.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tensor/error.h"

namespace linea::train {

class TokenizerFileReader {
 public:
  // body: the lines after the header; its first line is line first_line of the file.
  TokenizerFileReader(std::string_view body, std::string origin, int64_t first_line)
      : rest_(body), origin_(std::move(origin)), line_number_(first_line - 1) {}

  // The next line, without its '\n'; running out is an error saying what was expected.
  std::string_view line(const char* what);
  // A line "<key> <n>" with 0 <= n <= max; returns n.
  int64_t count(std::string_view key, int64_t max);
  // text as a decimal integer in [min, max].
  int64_t integer(std::string_view text, int64_t min, int64_t max, const char* what);
  // Extra lines after the expected ones mean the file is not what its header says.
  void finish();

  // Builds the tokenizer from what was read; a vocabulary its constructor rejects is reported
  // as an error in this file.
  template <class T, class... Args>
  std::unique_ptr<T> make(Args&&... args) const {
    try {
      return std::make_unique<T>(std::forward<Args>(args)...);
    } catch (const Error& e) {
      error(e.what());
    }
  }

  template <class... Parts>
  [[noreturn]] void error(const Parts&... parts) const {
    fail("load_tokenizer", "'", origin_, "' line ", line_number_, ": ", parts...);
  }

 private:
  std::string_view rest_;
  std::string origin_;
  int64_t line_number_;
};

}  // namespace linea::train
