#include "dist/rendezvous.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>

#include "tensor/error.h"

namespace linea::dist {

using wire::Clock;
using wire::Fd;
using wire::Io;

namespace {

// The hello a rank sends after connecting, before any frame: a fixed size, so that rank 0 can
// check it without trusting a length, and a magic, so that a stray program on the port is told
// apart from a rank.
constexpr char kMagic[8] = {'L', 'I', 'N', 'E', 'A', 'R', 'D', 'V'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHelloSize = sizeof kMagic + 3 * 4;  // magic, version, rank, world size

// Ranks other than 0 wait this much longer than the timeout for rank 0's verdict: rank 0 knows
// which rank is missing or silent, so its message is the one worth reporting.
constexpr double kVerdictGrace_s = 2.0;
// How long rank 0 spends telling the others why it gives up, and a rank between two attempts to
// reach a master that is not up yet.
constexpr double kRejectBound_s = 0.5;
constexpr auto kRetryPause = std::chrono::milliseconds(100);

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

uint32_t get_u32(std::string_view in, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(in[at + i]);
  return v;
}

std::string seconds(double s) {
  std::ostringstream os;
  os << s << " s";
  return os.str();
}

// "rank 0 (the master)" reads better in a message than a bare "rank 0".
std::string who(int rank) { return rank == 0 ? "rank 0 (the master)" : "rank " + std::to_string(rank); }

void set_nodelay(int fd) {
  // Rendezvous and heartbeat messages are a few bytes each: send them now, not after 40 ms.
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Binds the wildcard address on `port` (see Rendezvous::join for why): IPv6 with IPv4 mapped in,
// so that the master may be named by either family, or IPv4 alone where IPv6 is off.
Fd listen_on(int port, const std::string& master) {
  int last_error = 0;
  for (const int family : {AF_INET6, AF_INET}) {
    Fd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      last_error = errno;
      continue;
    }
    const int one = 1, zero = 0;
    // A restarted run must not wait for the previous run's connections to leave TIME_WAIT.
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage address{};
    socklen_t length = 0;
    if (family == AF_INET6) {
      ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      auto* a = reinterpret_cast<sockaddr_in6*>(&address);
      a->sin6_family = AF_INET6;
      a->sin6_addr = in6addr_any;
      a->sin6_port = htons(static_cast<uint16_t>(port));
      length = sizeof *a;
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&address);
      a->sin_family = AF_INET;
      a->sin_addr.s_addr = htonl(INADDR_ANY);
      a->sin_port = htons(static_cast<uint16_t>(port));
      length = sizeof *a;
    }
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), length) == 0 && ::listen(fd.get(), SOMAXCONN) == 0)
      return fd;
    last_error = errno;
    // A port in use is in use for both families: say so rather than try IPv4.
    if (last_error == EADDRINUSE || last_error == EACCES) break;
  }
  fail("rendezvous", "rank 0 cannot listen on port ", port, " for the rendezvous at ", master, ": ",
       wire::error_text(last_error));
}

// One attempt to connect to any address of `master` before `deadline`. Sets `error` on failure.
Fd try_connect(const Endpoint& master, Clock::time_point deadline, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int status = ::getaddrinfo(master.host.c_str(), std::to_string(master.port).c_str(), &hints, &found);
  if (status != 0) {
    error = ::gai_strerror(status);  // a name that does not resolve (yet: DNS may lag a new host)
    return Fd();
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, ::freeaddrinfo);
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      error = wire::error_text(errno);
      continue;
    }
    int err = 0;
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS || err == EINTR) {
        pollfd p{fd.get(), POLLOUT, 0};
        int n;
        while ((n = ::poll(&p, 1, wire::poll_ms_until(deadline))) < 0 && errno == EINTR) {}
        socklen_t len = sizeof err;
        if (n == 1) ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        else err = ETIMEDOUT;
      }
    }
    if (err == 0) {
      set_nodelay(fd.get());
      return fd;
    }
    error = wire::error_text(err);
  }
  return Fd();
}

// Rank 0: tells each connection why the rendezvous failed, without waiting long on any.
void reject_all(std::vector<Fd>& fds, const std::string& message) {
  const auto deadline = wire::deadline_in(kRejectBound_s);
  for (Fd& fd : fds)
    if (fd.valid()) wire::write_frame(fd.get(), wire::Type::kReject, message, deadline);
  fds.clear();
}

// Rank 0: the error in a hello, or "" when it is a rank this rendezvous expects.
std::string check_hello(std::string_view hello, int world_size, const std::vector<Fd>& joined,
                        const std::string& master) {
  if (!std::equal(kMagic, kMagic + sizeof kMagic, hello.begin()))
    return "a connection to the rendezvous at " + master +
           " does not speak linea's rendezvous protocol (is another program using the port?)";
  const uint32_t version = get_u32(hello, 8), rank = get_u32(hello, 12), size = get_u32(hello, 16);
  const std::string r = std::to_string(rank), n = std::to_string(world_size);
  if (version != kVersion)
    return "rank " + r + " speaks version " + std::to_string(version) + " of the rendezvous protocol, rank 0 version " +
           std::to_string(kVersion) + ": are all ranks the same linea build?";
  if (rank >= static_cast<uint32_t>(world_size))
    return "rank " + r + " joined a rendezvous of " + n + " ranks (it was started with a world size of " +
           std::to_string(size) + ")";
  if (size != static_cast<uint32_t>(world_size))
    return "rank " + r + " was started with a world size of " + std::to_string(size) + ", rank 0 with " + n;
  if (rank == 0 || joined[rank].valid()) return "two processes claim rank " + r;
  return "";
}

std::string missing_ranks(const std::vector<Fd>& joined) {
  std::vector<int> missing;
  for (size_t k = 1; k < joined.size(); ++k)
    if (!joined[k].valid()) missing.push_back(static_cast<int>(k));
  std::string list;
  for (size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + std::to_string(missing[i]);
  return (missing.size() == 1 ? "rank " : "ranks ") + list + " of " + std::to_string(joined.size());
}

}  // namespace

Rendezvous Rendezvous::join(const RendezvousOptions& options) {
  LINEA_CHECK(options.world_size >= 1, "rendezvous", "the world size must be at least 1, got ", options.world_size);
  LINEA_CHECK(options.rank >= 0 && options.rank < options.world_size, "rendezvous", "rank ", options.rank,
              " is outside a world of ", options.world_size, " ranks (0..", options.world_size - 1, ")");
  LINEA_CHECK(options.timeout_s > 0, "rendezvous", "the timeout must be positive, got ", options.timeout_s, " s");
  if (options.world_size == 1) {
    Rendezvous alone(0, 1, options.timeout_s, options.master.str());
    alone.peers_.resize(1);
    return alone;
  }
  LINEA_CHECK(!options.master.host.empty() && options.master.port >= 1 && options.master.port <= 65535, "rendezvous",
              "a run of ", options.world_size, " ranks needs a master ADDR:PORT, got \"", options.master.str(), "\"");
  return options.rank == 0 ? join_as_master(options) : join_as_rank(options);
}

Rendezvous Rendezvous::join_as_master(const RendezvousOptions& options) {
  const std::string master = options.master.str();
  Fd listener = listen_on(options.master.port, master);
  const auto deadline = wire::deadline_in(options.timeout_s);
  Rendezvous r(0, options.world_size, options.timeout_s, master);
  r.peers_.resize(options.world_size);
  // Connections accepted but not yet identified, with the part of their hello that has arrived.
  std::vector<Fd> pending;
  std::vector<std::string> hellos;
  const auto give_up = [&](const std::string& message) {
    reject_all(pending, message);
    reject_all(r.peers_, message);
    fail("rendezvous", message);
  };
  for (int joined = 1; joined < options.world_size;) {
    if (Clock::now() >= deadline)
      give_up("after " + seconds(options.timeout_s) + ", " + missing_ranks(r.peers_) +
              " had not joined the rendezvous at " + master);
    std::vector<pollfd> polled{{listener.get(), POLLIN, 0}};
    for (const Fd& fd : pending) polled.push_back({fd.get(), POLLIN, 0});
    if (::poll(polled.data(), polled.size(), wire::poll_ms_until(deadline)) <= 0) continue;  // timeout, EINTR
    for (size_t i = pending.size(); i-- > 0;) {
      if (polled[i + 1].revents == 0) continue;
      char buffer[kHelloSize];
      const ssize_t got = ::recv(pending[i].get(), buffer, kHelloSize - hellos[i].size(), MSG_DONTWAIT);
      if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (got > 0) hellos[i].append(buffer, static_cast<size_t>(got));
      if (got > 0 && hellos[i].size() < kHelloSize) continue;
      if (got > 0) {
        const std::string error = check_hello(hellos[i], options.world_size, r.peers_, master);
        if (!error.empty()) give_up(error);
        r.peers_[get_u32(hellos[i], 12)] = std::move(pending[i]);
        ++joined;
      }
      // Identified, or closed before its hello was complete (a probe of the port, or a rank that
      // died: it is then missing, and the timeout names it).
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      hellos.erase(hellos.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (polled[0].revents != 0) {
      for (int fd; (fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
        set_nodelay(fd);
        pending.emplace_back(fd);
        hellos.emplace_back();
      }
    }
  }
  // Nobody else may join now (the port is free for the next run), and everyone may start.
  listener.reset();
  reject_all(pending, "the rendezvous at " + master + " is complete: every rank has joined");
  for (int k = 1; k < options.world_size; ++k) r.send_data(k, "", "join", deadline);
  return r;
}

Rendezvous Rendezvous::join_as_rank(const RendezvousOptions& options) {
  const std::string master = options.master.str();
  const auto deadline = wire::deadline_in(options.timeout_s);
  Rendezvous r(options.rank, options.world_size, options.timeout_s, master);
  r.peers_.resize(options.world_size);
  std::string error;
  for (;;) {  // the master may not be listening yet
    r.peers_[0] = try_connect(options.master, deadline, error);
    if (r.peers_[0].valid()) break;
    LINEA_CHECK(Clock::now() < deadline, "rendezvous", "rank ", options.rank, " could not reach the master ", master,
                " within ", seconds(options.timeout_s), " (", error, ")");
    std::this_thread::sleep_for(std::min<Clock::duration>(kRetryPause, deadline - Clock::now()));
  }
  std::string hello(kMagic, sizeof kMagic);
  put_u32(hello, kVersion);
  put_u32(hello, static_cast<uint32_t>(options.rank));
  put_u32(hello, static_cast<uint32_t>(options.world_size));
  const Io io = wire::write_all(r.peers_[0].get(), hello.data(), hello.size(), deadline);
  LINEA_CHECK(io == Io::kOk, "rendezvous", "rank ", options.rank, " could not introduce itself to the master ",
              master, " (", io == Io::kClosed ? "it closed the connection" : "it is not reading", ")");
  // The master's empty message says every rank has joined; waiting for it makes join a barrier.
  r.receive_data(0, "join", deadline);
  return r;
}

void Rendezvous::abandon(const std::string& message) {
  reject_all(peers_, message);
  fail("rendezvous", message);
}

std::string Rendezvous::receive_data(int from, const char* collective, Clock::time_point deadline) {
  if (rank_ != 0)
    deadline += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kVerdictGrace_s));
  wire::Frame frame;
  Io io = Io::kClosed;
  std::string error;
  try {
    io = wire::read_frame(peers_[from].get(), frame, deadline);
  } catch (const Error& e) {
    error = e.what();
  }
  if (error.empty() && io == Io::kTimeout)
    error = who(from) + " sent nothing for " + seconds(timeout_s_) + " during the rendezvous (" + collective + ")";
  else if (error.empty() && io == Io::kClosed)
    error = who(from) + " closed its connection during the rendezvous";
  else if (error.empty() && frame.type == wire::Type::kReject)
    error = frame.payload;  // rank 0's verdict, which names the rank at fault
  else if (error.empty() && frame.type != wire::Type::kData)
    error = who(from) + " sent a message of unexpected type " + std::to_string(static_cast<int>(frame.type)) +
            " during the rendezvous (" + collective + ")";
  if (error.empty()) return std::move(frame.payload);
  if (rank_ == 0) abandon(error);
  peers_.clear();
  fail("rendezvous", error);
}

void Rendezvous::send_data(int to, const std::string& payload, const char* collective, Clock::time_point deadline) {
  const Io io = wire::write_frame(peers_[to].get(), wire::Type::kData, payload, deadline);
  if (io == Io::kOk) return;
  const std::string error = io == Io::kClosed
                                ? who(to) + " closed its connection during the rendezvous"
                                : who(to) + " took no data for " + seconds(timeout_s_) + " during the rendezvous (" +
                                      collective + ")";
  if (rank_ == 0) abandon(error);
  peers_.clear();
  fail("rendezvous", error);
}

std::vector<std::string> Rendezvous::all_gather(const std::string& mine) {
  LINEA_CHECK(static_cast<int>(peers_.size()) == world_size_, "rendezvous",
              "all_gather on a rendezvous whose connections went to a peer monitor or were closed by an error");
  if (world_size_ == 1) return {mine};
  const auto deadline = wire::deadline_in(timeout_s_);
  if (rank_ != 0) {
    send_data(0, mine, "all_gather", deadline);
    const std::string packed = receive_data(0, "all_gather", deadline);
    std::vector<std::string> all;
    for (size_t at = 0; at + 4 <= packed.size();) {
      const uint32_t n = get_u32(packed, at);
      LINEA_CHECK(at + 4 + n <= packed.size(), "rendezvous", "rank 0 sent a truncated all_gather result");
      all.push_back(packed.substr(at + 4, n));
      at += 4 + n;
    }
    LINEA_CHECK(static_cast<int>(all.size()) == world_size_, "rendezvous", "rank 0 sent ", all.size(),
                " all_gather contributions for a world of ", world_size_, " ranks");
    return all;
  }
  std::vector<std::string> all(world_size_);
  all[0] = mine;
  for (int k = 1; k < world_size_; ++k) all[k] = receive_data(k, "all_gather", deadline);
  std::string packed;
  for (const std::string& s : all) {
    LINEA_CHECK(s.size() <= wire::kMaxPayload, "rendezvous", "an all_gather contribution of ", s.size(), " bytes");
    put_u32(packed, static_cast<uint32_t>(s.size()));
    packed += s;
  }
  for (int k = 1; k < world_size_; ++k) send_data(k, packed, "all_gather", deadline);
  return all;
}

std::string Rendezvous::broadcast(const std::string& value_on_root) {
  LINEA_CHECK(static_cast<int>(peers_.size()) == world_size_, "rendezvous",
              "broadcast on a rendezvous whose connections went to a peer monitor or were closed by an error");
  if (world_size_ == 1) return value_on_root;
  const auto deadline = wire::deadline_in(timeout_s_);
  if (rank_ != 0) return receive_data(0, "broadcast", deadline);
  for (int k = 1; k < world_size_; ++k) send_data(k, value_on_root, "broadcast", deadline);
  return value_on_root;
}

void Rendezvous::barrier() { all_gather(""); }

PeerMonitor Rendezvous::start_monitor(const MonitorOptions& options) && {
  LINEA_CHECK(static_cast<int>(peers_.size()) == world_size_, "rendezvous",
              "start_monitor on a rendezvous whose connections already went to a monitor or were closed by an error");
  return PeerMonitor(rank_, world_size_, std::move(peers_), options);
}

}  // namespace linea::dist
