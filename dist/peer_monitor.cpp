#include "dist/peer_monitor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

#include "tensor/error.h"

namespace linea::dist {

using wire::Clock;
using wire::Fd;

namespace {

// How long report_failure and close wait for their message to leave: a peer that is not reading
// (hung) must not hold up the exit of a rank that wants to report it.
constexpr double kFlushBound_s = 2.0;
// Heartbeats are not queued for a peer that has left this many bytes unread: it is hung, and its
// silence towards us (or its end) is what reports it.
constexpr size_t kMaxQueued = 64 * 1024;

std::string seconds(double s) {
  std::ostringstream os;
  os << s << " s";
  return os.str();
}

std::string who(int rank) { return rank == 0 ? "rank 0 (the master)" : "rank " + std::to_string(rank); }

Clock::duration to_duration(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

struct Peer {
  int rank = 0;
  Fd fd;  // empty once the connection has ended
  wire::FrameReader reader;
  std::string out;  // frames not yet taken by the kernel
  Clock::time_point last_heard;
  bool watched = true;        // false after its goodbye or its failure: its end is then no news
  bool write_broken = false;  // a write failed; the read side reports the end
};

}  // namespace

struct PeerMonitor::State {
  int rank = 0;
  int world_size = 1;
  MonitorOptions options;
  Fd wake;  // an eventfd: callers wake the thread through it
  std::vector<Peer> peers;  // the monitor thread's alone while it runs
  std::thread thread;

  mutable std::mutex mutex;
  std::condition_variable flushed;
  std::optional<std::string> failure;
  std::function<void(const std::string&)> callback;
  std::vector<std::string> reports;  // report_failure's messages, for the thread to send
  bool goodbye = false;              // close() asks the thread to say goodbye
  bool running = false;  // the thread runs (stop_thread has not been called)
  bool stop = false;
  bool closed = false;
  uint64_t requested = 0, done = 0;  // requests made, and those whose bytes have left

  void run();
  // Records the first failure, forwards it (rank 0, to every rank but skip_rank) and fires the
  // callback. Later failures change nothing.
  void declare(const std::string& message, int skip_rank, bool forward = true);
  void queue(Peer& p, wire::Type type, std::string_view payload);
  void flush(Peer& p);
  void read_from(Peer& p);
  void handle(Peer& p, wire::Frame frame);
  void lost(Peer& p);
  void wake_thread();
  void stop_thread();
};

PeerMonitor::PeerMonitor(int rank, int world_size, std::vector<Fd> peers, const MonitorOptions& options)
    : state_(std::make_unique<State>()) {
  LINEA_CHECK(options.heartbeat_interval_s > 0, "peer_monitor", "the heartbeat interval must be positive, got ",
              seconds(options.heartbeat_interval_s));
  LINEA_CHECK(options.heartbeat_timeout_s > options.heartbeat_interval_s, "peer_monitor", "the heartbeat timeout (",
              seconds(options.heartbeat_timeout_s), ") must exceed the heartbeat interval (",
              seconds(options.heartbeat_interval_s), ")");
  State& s = *state_;
  s.rank = rank;
  s.world_size = world_size;
  s.options = options;
  const auto now = Clock::now();
  for (size_t k = 0; k < peers.size(); ++k) {
    if (!peers[k].valid()) continue;
    Peer& p = s.peers.emplace_back();
    p.rank = static_cast<int>(k);
    p.fd = std::move(peers[k]);
    p.last_heard = now;
  }
  if (s.peers.empty()) return;  // a world of one: nobody to watch
  s.wake = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  LINEA_CHECK(s.wake.valid(), "peer_monitor", "cannot create an eventfd: ", wire::error_text(errno));
  s.running = true;
  s.thread = std::thread([&s] { s.run(); });
}

PeerMonitor::PeerMonitor(PeerMonitor&&) noexcept = default;
PeerMonitor& PeerMonitor::operator=(PeerMonitor&& other) noexcept {
  if (this != &other) {
    if (state_) state_->stop_thread();  // what this one held ends as a destructor ends it
    state_ = std::move(other.state_);
  }
  return *this;
}

PeerMonitor::~PeerMonitor() {
  if (state_) state_->stop_thread();  // no goodbye: the peers take our end for a failure
}

int PeerMonitor::rank() const { return state_ ? state_->rank : 0; }
int PeerMonitor::world_size() const { return state_ ? state_->world_size : 1; }

std::optional<std::string> PeerMonitor::failure() const {
  if (!state_) return std::nullopt;
  std::lock_guard lock(state_->mutex);
  return state_->failure;
}

void PeerMonitor::on_failure(std::function<void(const std::string& message)> callback) {
  if (!state_ || !callback) return;
  std::unique_lock lock(state_->mutex);
  if (!state_->failure) {
    state_->callback = std::move(callback);
    return;
  }
  const std::string message = *state_->failure;
  lock.unlock();
  callback(message);
}

void PeerMonitor::report_failure(const std::string& message) noexcept {
  if (!state_) return;
  State& s = *state_;
  try {
    std::unique_lock lock(s.mutex);
    if (s.closed || !s.running) {  // nobody left to tell: only this rank's record
      lock.unlock();
      s.declare("rank " + std::to_string(s.rank) + " failed: " + message, s.rank, /*forward=*/false);
      return;
    }
    s.reports.push_back(message);
    const uint64_t id = ++s.requested;
    s.wake_thread();
    s.flushed.wait_until(lock, wire::deadline_in(kFlushBound_s), [&] { return s.done >= id; });
  } catch (...) {
    // Best effort: the rank is already on its way out with an error of its own.
  }
}

void PeerMonitor::close() noexcept {
  if (!state_) return;
  State& s = *state_;
  {
    std::unique_lock lock(s.mutex);
    if (s.closed) return;
    s.closed = true;
    if (s.running) {
      s.goodbye = true;
      const uint64_t id = ++s.requested;
      s.wake_thread();
      s.flushed.wait_until(lock, wire::deadline_in(kFlushBound_s), [&] { return s.done >= id; });
    }
  }
  s.stop_thread();
}

std::string PeerMonitor::describe() const {
  if (!state_) return "an empty peer monitor";
  const State& s = *state_;
  std::ostringstream os;
  os << "rank " << s.rank << " of " << s.world_size << ", watching "
     << (s.world_size == 1 ? "nobody" : s.rank == 0 ? "every other rank" : "rank 0") << " (heartbeat every "
     << seconds(s.options.heartbeat_interval_s) << ", timeout " << seconds(s.options.heartbeat_timeout_s) << ")";
  return os.str();
}

void PeerMonitor::State::wake_thread() {
  const uint64_t one = 1;
  if (!wake.valid()) return;
  // It cannot fail short of a full counter (2^64 - 1 wake-ups), which would wake the thread too.
  [[maybe_unused]] const ssize_t n = ::write(wake.get(), &one, sizeof one);
}

void PeerMonitor::State::stop_thread() {
  if (thread.joinable()) {
    {
      std::lock_guard lock(mutex);
      stop = true;
      running = false;
    }
    wake_thread();
    thread.join();
  }
  peers.clear();  // closes the connections
}

void PeerMonitor::State::declare(const std::string& message, int skip_rank, bool forward) {
  std::function<void(const std::string&)> fire;
  {
    std::lock_guard lock(mutex);
    if (failure) return;  // the first failure wins
    failure = message;
    fire = std::move(callback);
    callback = nullptr;
  }
  // Rank 0 is the hub: a failure it learns of reaches the others only through it. Sent before the
  // callback runs, which may take a while (it aborts NCCL).
  if (rank == 0 && forward) {
    for (Peer& p : peers) {
      if (p.rank == skip_rank || !p.fd.valid()) continue;
      queue(p, wire::Type::kFailure, message);
      flush(p);
    }
  }
  if (fire) {
    try {
      fire(message);
    } catch (...) {
      // An exception must not end the monitor's thread (std::terminate); the failure is recorded.
    }
  }
}

void PeerMonitor::State::queue(Peer& p, wire::Type type, std::string_view payload) {
  if (p.fd.valid() && !p.write_broken) p.out += wire::encode_frame(type, payload);
}

void PeerMonitor::State::flush(Peer& p) {
  while (!p.out.empty() && p.fd.valid() && !p.write_broken) {
    const ssize_t sent = ::send(p.fd.get(), p.out.data(), p.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      p.out.erase(0, static_cast<size_t>(sent));
    } else if (sent < 0 && errno == EINTR) {
      continue;
    } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;  // poll says when the peer has read some
    } else {
      // The peer is gone. Its last frames (a goodbye?) may still wait in our receive queue, so
      // the read side, which sees them first, decides whether that is a failure.
      p.write_broken = true;
      p.out.clear();
    }
  }
}

void PeerMonitor::State::lost(Peer& p) {
  if (p.watched) declare(who(p.rank) + " exited or crashed (its connection closed)", p.rank);
  p.watched = false;
  p.out.clear();
  p.fd.reset();
}

void PeerMonitor::State::handle(Peer& p, wire::Frame frame) {
  switch (frame.type) {
    case wire::Type::kGoodbye:
      p.watched = false;
      break;
    case wire::Type::kFailure:
      p.watched = false;  // it is on its way out: its end is no further news
      // From rank 0 the message is final (it names the rank); to rank 0 it is rank k's own words.
      declare(rank == 0 ? "rank " + std::to_string(p.rank) + " failed: " + frame.payload : frame.payload, p.rank);
      break;
    default:
      break;  // a heartbeat: its arrival is the news (last_heard)
  }
}

void PeerMonitor::State::read_from(Peer& p) {
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::recv(p.fd.get(), buffer, sizeof buffer, MSG_DONTWAIT);
    if (got > 0) {
      p.last_heard = Clock::now();
      p.reader.append(buffer, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    const bool ended = got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    // Frames first: a goodbye or failure report that arrived just before the end explains it.
    try {
      while (auto frame = p.reader.next()) handle(p, std::move(*frame));
    } catch (const Error&) {
      // A length no rank sends: the stream cannot be followed any further.
      if (p.watched) declare(who(p.rank) + " sent bytes that are not linea's protocol", p.rank);
      p.watched = false;
      lost(p);
      return;
    }
    if (ended) lost(p);
    return;
  }
}

void PeerMonitor::State::run() {
  const auto interval = to_duration(options.heartbeat_interval_s);
  const auto timeout = to_duration(options.heartbeat_timeout_s);
  auto next_beat = Clock::now();
  bool said_goodbye = false;
  std::vector<pollfd> polled;
  for (;;) {
    std::vector<std::string> to_report;
    bool say_goodbye = false;
    uint64_t request = 0;
    {
      std::lock_guard lock(mutex);
      if (stop) return;
      to_report.swap(reports);
      say_goodbye = goodbye && !said_goodbye;
      request = requested;
    }
    for (const std::string& message : to_report) {
      // Rank 0's report goes to everyone as it is; another rank's goes to rank 0, which adds the
      // rank's number and forwards it.
      const std::string full = "rank " + std::to_string(rank) + " failed: " + message;
      for (Peer& p : peers) {
        queue(p, wire::Type::kFailure, rank == 0 ? full : message);
        flush(p);  // before the callback, which may take a while
      }
      // Sent even when another failure came first, but recorded only if it is the first.
      declare(full, rank, /*forward=*/false);
    }
    if (say_goodbye) {
      for (Peer& p : peers) queue(p, wire::Type::kGoodbye, "");
      said_goodbye = true;
    }
    auto now = Clock::now();
    if (now >= next_beat && !said_goodbye) {
      for (Peer& p : peers)
        if (p.out.size() < kMaxQueued) queue(p, wire::Type::kHeartbeat, "");
      next_beat = std::max(next_beat + interval, now);
    }
    for (Peer& p : peers) flush(p);

    auto wake_at = next_beat;
    for (Peer& p : peers) {
      if (!p.watched) continue;
      if (now - p.last_heard >= timeout) {
        p.watched = false;
        declare(who(p.rank) + " sent no heartbeat for " + seconds(options.heartbeat_timeout_s) +
                    ": it is hung or stopped",
                p.rank);
      } else {
        wake_at = std::min(wake_at, p.last_heard + timeout);
      }
    }
    const bool all_sent = std::all_of(peers.begin(), peers.end(), [](const Peer& p) { return p.out.empty(); });
    if (all_sent) {
      std::lock_guard lock(mutex);
      done = std::max(done, request);
      flushed.notify_all();
    }

    polled.clear();
    polled.push_back({wake.get(), POLLIN, 0});
    for (const Peer& p : peers) {
      const short events = static_cast<short>(POLLIN | (p.out.empty() ? 0 : POLLOUT));
      polled.push_back({p.fd.valid() ? p.fd.get() : -1, events, 0});  // poll skips a negative fd
    }
    const int n = ::poll(polled.data(), polled.size(), wire::poll_ms_until(wake_at));
    if (n <= 0) continue;  // time for a heartbeat or a check, or EINTR
    if (polled[0].revents != 0) {
      uint64_t count;
      [[maybe_unused]] const ssize_t r = ::read(wake.get(), &count, sizeof count);
    }
    for (size_t i = 0; i < peers.size(); ++i) {
      Peer& p = peers[i];
      if (!p.fd.valid() || polled[i + 1].revents == 0) continue;
      // A hangup or error shows as end of stream or an error on read, after any frames.
      read_from(p);
      if (p.fd.valid() && (polled[i + 1].revents & POLLOUT)) flush(p);
    }
  }
}

}  // namespace linea::dist
