#pragma once
// The peer monitor turns the rendezvous's connections into a failure detector for the rest of a
// data-parallel run. NCCL waits forever for a rank that died or hung in the middle of a collective;
// the monitor lets every other rank learn, within a bounded time, which rank it was, so that it can
// abort NCCL (on_failure) and exit with an error naming that rank instead of hanging.
//
// One background thread owns the connections of the star: every rank sends a heartbeat every
// heartbeat_interval_s; rank 0 watches every other rank and the others watch rank 0. A rank is
// failed when its connection closes without a goodbye (it exited or crashed), when it reports a
// failure, or when it is silent for heartbeat_timeout_s (hung, or stopped). Rank 0 forwards a
// failure it learns of to every other rank, so a failure anywhere reaches everyone within about
// heartbeat_timeout_s + heartbeat_interval_s (at once for a crash: the kernel closes its sockets).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/wire.h"

namespace linea::dist {

struct MonitorOptions {
  double heartbeat_interval_s = 1.0;
  double heartbeat_timeout_s = 60.0;  // must exceed the interval
};

class PeerMonitor {
 public:
  // Watches `peers` (indexed by rank: rank 0 holds a connection to every other rank, the others
  // one to rank 0 at peers[0]; this rank's own entry is empty). Made by
  // Rendezvous::start_monitor; a world of one rank watches nothing and starts no thread.
  PeerMonitor(int rank, int world_size, std::vector<wire::Fd> peers, const MonitorOptions& options);
  PeerMonitor(PeerMonitor&&) noexcept;
  PeerMonitor& operator=(PeerMonitor&&) noexcept;
  PeerMonitor(const PeerMonitor&) = delete;
  PeerMonitor& operator=(const PeerMonitor&) = delete;
  // Without close(): stops the thread and closes the connections without a goodbye, so the peers
  // see a failure (an exception unwinding through the run is one).
  ~PeerMonitor();

  int rank() const;
  int world_size() const;

  // The first failure this rank learned of ("rank 3 exited or crashed (its connection closed)"),
  // or the one it reported itself; nullopt while every rank is healthy. Thread-safe.
  std::optional<std::string> failure() const;

  // `callback` is called once, from the monitor's thread, when the first failure is detected (the
  // NCCL communicator aborts its collectives in it); at once, from this thread, if one already
  // was. It must not call close() or destroy the monitor (they join the thread it runs on).
  void on_failure(std::function<void(const std::string& message)> callback);

  // This rank is about to exit with an error: tells the others, so they fail with `message`
  // instead of a bare "exited". A rank other than 0 tells rank 0, which forwards
  // "rank k failed: <message>" to everyone; rank 0 sends "rank 0 failed: <message>" itself. It is
  // also this rank's failure() (and fires on_failure) unless one came first. Best effort: waits a
  // bounded time (2 s at most) for the bytes to leave, never throws.
  void report_failure(const std::string& message) noexcept;

  // The orderly end of a successful run: says goodbye to the peers (so they do not take the end
  // of the connection for a crash: a goodbye from rank k makes rank 0 stop watching k, one from
  // rank 0 makes the others stop watching), then stops the thread and closes the connections.
  // Idempotent; bounded in time.
  void close() noexcept;

  // "rank 1 of 4, watching rank 0 (heartbeat every 1 s, timeout 60 s)", for logs.
  std::string describe() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace linea::dist
