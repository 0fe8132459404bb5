#include "dist/wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tensor/error.h"

namespace linea::dist::wire {

Clock::time_point deadline_in(double seconds) {
  constexpr double kYear = 365.0 * 24 * 3600;
  const double capped = seconds < 0 ? 0 : (seconds > kYear ? kYear : seconds);
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(capped));
}

int poll_ms_until(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > 1'000'000'000 ? 1'000'000'000 : static_cast<int>(ms);
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() {
  if (fd_ < 0) return;
  char sink[4096];
  // Bounded: a peer could keep sending, so a fixed number of reads, none of which waits.
  for (int i = 0; i < 64; ++i) {
    const ssize_t got = ::recv(fd_, sink, sizeof sink, MSG_DONTWAIT);
    if (got > 0 || (got < 0 && errno == EINTR)) continue;
    break;
  }
  ::close(fd_);
  fd_ = -1;
}

std::string encode_frame(Type type, std::string_view payload) {
  LINEA_CHECK(payload.size() <= kMaxPayload, "rendezvous", "a message of ", payload.size(),
              " bytes exceeds the limit of ", kMaxPayload, " bytes");
  const auto n = static_cast<uint32_t>(payload.size());
  std::string bytes;
  bytes.reserve(5 + payload.size());
  bytes.push_back(static_cast<char>(type));
  for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>((n >> shift) & 0xff));
  bytes.append(payload);
  return bytes;
}

namespace {

// Waits until `fd` is ready for `events` or `deadline` passes. False on timeout. A hung-up or
// failed socket counts as ready: the read or write that follows reports it.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, poll_ms_until(deadline));
    if (n > 0) return true;
    if (n == 0 && Clock::now() >= deadline) return false;
    if (n < 0 && errno != EINTR) return true;  // let the read or write report the socket's error
  }
}

uint32_t decode_length(const unsigned char* header) {
  return (uint32_t{header[1]} << 24) | (uint32_t{header[2]} << 16) | (uint32_t{header[3]} << 8) | header[4];
}

void check_length(uint32_t n) {
  LINEA_CHECK(n <= kMaxPayload, "rendezvous", "a peer announced a message of ", n, " bytes (the limit is ",
              kMaxPayload, "): it does not speak linea's rendezvous protocol");
}

// Moves `size` bytes at p through `move_some` (a non-blocking send or recv of up to n bytes at p,
// returning what it returns), waiting for `events` on fd whenever the socket is not ready.
template <class Byte, class MoveSome>
Io move_all(int fd, Byte* p, size_t size, short events, Clock::time_point deadline, MoveSome move_some) {
  while (size > 0) {
    const ssize_t moved = move_some(p, size);
    if (moved > 0) {
      p += moved;
      size -= static_cast<size_t>(moved);
    } else if (moved < 0 && errno == EINTR) {
      continue;
    } else if (moved < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd, events, deadline)) return Io::kTimeout;
    } else {
      return Io::kClosed;  // recv's 0: end of stream; EPIPE, ECONNRESET, ...: the peer is gone
    }
  }
  return Io::kOk;
}

}  // namespace

Io write_all(int fd, const void* data, size_t size, Clock::time_point deadline) {
  return move_all(fd, static_cast<const char*>(data), size, POLLOUT, deadline,
                  [fd](const char* p, size_t n) { return ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT); });
}

Io read_exact(int fd, void* data, size_t size, Clock::time_point deadline) {
  return move_all(fd, static_cast<char*>(data), size, POLLIN, deadline,
                  [fd](char* p, size_t n) { return ::recv(fd, p, n, MSG_DONTWAIT); });
}

Io read_frame(int fd, Frame& frame, Clock::time_point deadline) {
  unsigned char header[5];
  if (const Io io = read_exact(fd, header, sizeof header, deadline); io != Io::kOk) return io;
  const uint32_t n = decode_length(header);
  check_length(n);
  frame.type = static_cast<Type>(header[0]);
  frame.payload.assign(n, '\0');
  return read_exact(fd, frame.payload.data(), n, deadline);
}

std::optional<Frame> FrameReader::next() {
  if (buffer_.size() < 5) return std::nullopt;
  const auto* header = reinterpret_cast<const unsigned char*>(buffer_.data());
  const uint32_t n = decode_length(header);
  check_length(n);
  if (buffer_.size() < 5 + size_t{n}) return std::nullopt;
  Frame frame{static_cast<Type>(header[0]), buffer_.substr(5, n)};
  buffer_.erase(0, 5 + size_t{n});
  return frame;
}

namespace {
// strerror_r is GNU's (returns the text, maybe not in the buffer) or XSI's (fills the buffer).
[[maybe_unused]] std::string strerror_result(const char* text, const char*) { return text; }
[[maybe_unused]] std::string strerror_result(int status, const char* buffer) {
  return status == 0 ? buffer : "an unknown error";
}
}  // namespace

std::string error_text(int err) {
  char buffer[256] = {};
  return strerror_result(::strerror_r(err, buffer, sizeof buffer), buffer);
}

}  // namespace linea::dist::wire
