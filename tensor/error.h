#pragma once
// Errors are exceptions that carry context: the op and the shapes, dtypes and devices involved.
// Bad user input must never abort or segfault, so every check in linea goes through these.
#include <sstream>
#include <stdexcept>
#include <string>

namespace linea {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class First, class... Rest>
void append(std::ostringstream& os, const First& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
}  // namespace detail

// Builds "linea.<op>: <parts...>" and throws it.
template <class... Parts>
[[noreturn]] void fail(const char* op, const Parts&... parts) {
  std::ostringstream os;
  os << "linea." << op << ": ";
  detail::append(os, parts...);
  throw Error(os.str());
}

}  // namespace linea

// LINEA_CHECK(cond, "op", "what went wrong, with ", values...) throws linea::Error when cond is false.
#define LINEA_CHECK(cond, op, ...)          \
  do {                                       \
    if (!(cond)) ::linea::fail(op, __VA_ARGS__); \
  } while (0)
