#pragma once
// The bytes on the wire between the ranks of a run, shared by the rendezvous (rendezvous.h) and
// the peer monitor (peer_monitor.h): owned sockets, reads and writes bounded by a deadline, and
// frames. A frame is one type byte, a 4-byte big-endian length and that many bytes of payload, so
// a reader always knows where a message ends however TCP splits or merges the bytes.
//
// Every read and write polls first and then moves what the kernel takes without blocking
// (MSG_DONTWAIT), so nothing here waits past its deadline, a signal (EINTR) only retries, and a
// peer that is gone is an error code, never SIGPIPE (MSG_NOSIGNAL).
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace linea::dist::wire {

using Clock = std::chrono::steady_clock;

// A deadline `seconds` from now; a huge or infinite value is capped (steady_clock would overflow).
Clock::time_point deadline_in(double seconds);

// Milliseconds left until `deadline` for poll(): 0 once it has passed, rounded up otherwise.
int poll_ms_until(Clock::time_point deadline);

// A socket, closed when it goes out of scope; move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  // Closes the socket. Unread bytes are read and dropped first: closing a TCP socket whose
  // receive queue is not empty sends a reset, and a reset can make the peer lose the last
  // message this side sent it (a goodbye, a failure report).
  void reset();

 private:
  int fd_ = -1;
};

enum class Type : uint8_t {
  kReject = 1,     // master -> rank: the rendezvous failed; payload: why
  kData = 2,       // a collective's contribution or result (or, empty, "every rank has joined")
  kHeartbeat = 3,  // "still alive" (peer monitor)
  kGoodbye = 4,    // orderly end: the connection's close that follows is not a crash
  kFailure = 5,    // a rank failed; payload: the message
};

// A frame larger than this is a peer that does not speak this protocol, not a message.
constexpr uint32_t kMaxPayload = 256u << 20;

std::string encode_frame(Type type, std::string_view payload);

struct Frame {
  Type type{};
  std::string payload;
};

// What became of a bounded read or write.
enum class Io { kOk, kTimeout, kClosed };

// Writes all `size` bytes before `deadline`. kClosed: the peer is gone (reset, broken pipe).
Io write_all(int fd, const void* data, size_t size, Clock::time_point deadline);
inline Io write_frame(int fd, Type type, std::string_view payload, Clock::time_point deadline) {
  const std::string bytes = encode_frame(type, payload);
  return write_all(fd, bytes.data(), bytes.size(), deadline);
}

// Reads exactly `size` bytes before `deadline`. kClosed: end of stream or reset, possibly after
// part of the bytes.
Io read_exact(int fd, void* data, size_t size, Clock::time_point deadline);

// Reads one frame before `deadline`. Throws linea::Error on a length over kMaxPayload.
Io read_frame(int fd, Frame& frame, Clock::time_point deadline);

// Assembles frames from bytes as they arrive, for a reader that must not wait for the rest of a
// frame (the monitor watches many sockets with one thread).
class FrameReader {
 public:
  void append(const char* data, size_t size) { buffer_.append(data, size); }
  // The next complete frame, if one has arrived. Throws linea::Error on a length over kMaxPayload.
  std::optional<Frame> next();

 private:
  std::string buffer_;
};

// The text of errno value `err` ("Connection refused").
std::string error_text(int err);

}  // namespace linea::dist::wire
