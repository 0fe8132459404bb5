#pragma once
// An endpoint is where a rank reaches the rendezvous of a data-parallel run: the master's address
// and port, as the user writes it on the command line (--master 10.0.0.1:29500, like torchrun's
// --master_addr and --master_port in one flag). Parsing it here, once, means every bad spelling
// gets the same error naming the flag, before any process waits on a socket.
#include <string>
#include <string_view>

namespace linea::dist {

struct Endpoint {
  std::string host;  // a hostname, an IPv4 address, or an IPv6 address (without brackets)
  int port = 0;
  // "host:port", or "[host]:port" when the host is an IPv6 address, so that the text parses back.
  std::string str() const;
};

// Parses "ADDR:PORT", where ADDR is a hostname or an IPv4 address, or "[IPv6]:PORT". Throws
// linea::Error naming `what` (the flag, e.g. "--master") and the text when it is malformed: no
// colon, an empty host, an unbracketed IPv6 address, or a port that is not an integer in 1..65535.
Endpoint parse_endpoint(std::string_view text, std::string_view what);

}  // namespace linea::dist
