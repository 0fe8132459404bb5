#include "dist/endpoint.h"

#include "tensor/error.h"

namespace linea::dist {

std::string Endpoint::str() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Endpoint parse_endpoint(std::string_view text, std::string_view what) {
  std::string quoted(1, '"');
  quoted.append(text).push_back('"');
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    LINEA_CHECK(close != std::string_view::npos, "endpoint", what, " ", quoted,
                ": an IPv6 address opened with '[' is never closed with ']' (expected [ADDR]:PORT)");
    LINEA_CHECK(close + 1 < text.size() && text[close + 1] == ':', "endpoint", what, " ", quoted,
                ": expected a colon and a port after the bracketed address ([ADDR]:PORT)");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    LINEA_CHECK(colon != std::string_view::npos, "endpoint", what, " ", quoted,
                ": expected ADDR:PORT (no colon, so no port)");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    // "::1:29500" cannot be split unambiguously: which colon starts the port?
    LINEA_CHECK(host.find(':') == std::string_view::npos, "endpoint", what, " ", quoted,
                ": an IPv6 address must be written in brackets, as [ADDR]:PORT");
  }
  LINEA_CHECK(!host.empty(), "endpoint", what, " ", quoted,
              ": the address before the port is empty (expected ADDR:PORT)");
  // Digits only: stoi would accept "+80", " 80" and "80abc".
  bool digits = !port.empty() && port.size() <= 5;
  for (char c : port) digits = digits && c >= '0' && c <= '9';
  const int value = digits ? std::stoi(std::string(port)) : 0;
  LINEA_CHECK(digits && value >= 1 && value <= 65535, "endpoint", what, " ", quoted, ": the port \"", port,
              "\" is not an integer in 1..65535");
  return Endpoint{std::string(host), value};
}

}  // namespace linea::dist
