#pragma once
// A TCP port nobody listens on, for tests that start a rendezvous: the kernel picks one when a
// socket binds port 0. It is free when this returns, and almost surely still when the test binds
// it a moment later (the kernel hands out ports in turn, not the same one again at once).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace linea::testing {

inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("free_port: socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);  // where the rendezvous binds, so a port free here is free there
  address.sin_port = 0;
  socklen_t length = sizeof address;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("free_port: cannot bind port 0");
  return ntohs(address.sin_port);
}

}  // namespace linea::testing
