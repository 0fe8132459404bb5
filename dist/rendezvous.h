#pragma once
// The rendezvous is how the processes of one data-parallel run (one per GPU, on one host or
// several, started like torchrun starts them) find each other before NCCL can: rank 0 listens on
// the master address, every other rank connects to it and says who it is, and rank 0 checks that
// the ranks add up (distinct, in range, the same world size). Over that star the ranks then swap
// the few bytes NCCL needs to start (its 128-byte unique id, broadcast from rank 0).
//
// Afterwards the connections stay open as a failure detector (start_monitor, peer_monitor.h): NCCL
// alone would wait forever for a rank that died, and a run must instead stop with an error naming
// that rank.
//
// Everything is bounded by timeout_s: connecting (the master may start after the others), joining,
// every collective. A missing or silent rank is an error that names it, never a hang.
#include <string>
#include <utility>
#include <vector>

#include "dist/endpoint.h"
#include "dist/peer_monitor.h"
#include "dist/wire.h"

namespace linea::dist {

struct RendezvousOptions {
  Endpoint master;       // where rank 0 listens and the others connect
  int rank = 0;          // this process, in [0, world_size)
  int world_size = 1;    // the number of processes in the run
  double timeout_s = 300;
};

class Rendezvous {
 public:
  // Rank 0 listens on master.port and waits for the other world_size - 1 ranks; the others
  // connect to the master, retrying every 100 ms until it is up. Returns once every rank has
  // joined (on every rank), throws linea::Error naming what is missing or wrong otherwise. A world
  // of 1 opens no socket.
  //
  // Rank 0 listens on every address of its host (the IPv6 and IPv4 wildcard), not only on
  // master.host: the master's name is how the others reach it, and it may name this host by an
  // address the host cannot bind (behind NAT) or one of several interfaces. torchrun's store does
  // the same.
  static Rendezvous join(const RendezvousOptions& options);

  Rendezvous(Rendezvous&&) noexcept = default;
  Rendezvous& operator=(Rendezvous&&) noexcept = default;
  ~Rendezvous() = default;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // Collectives over the star: every rank calls them in the same order. Each is bounded by the
  // timeout; a peer that closes its connection is an error naming that rank, and rank 0 passes
  // its error on to the others so that they fail with the same message.
  //
  // Every rank gets every rank's `mine`, in rank order. Any bytes, NUL included.
  std::vector<std::string> all_gather(const std::string& mine);
  // Every rank gets rank 0's `value_on_root` (the others' argument is ignored).
  std::string broadcast(const std::string& value_on_root);
  // Returns once every rank has called it.
  void barrier();

  // Hands the connections to a peer monitor, which watches them until the end of the run. The
  // rendezvous is empty afterwards.
  PeerMonitor start_monitor(const MonitorOptions& options) &&;

 private:
  Rendezvous(int rank, int world_size, double timeout_s, std::string master)
      : rank_(rank), world_size_(world_size), timeout_s_(timeout_s), master_(std::move(master)) {}
  static Rendezvous join_as_master(const RendezvousOptions& options);
  static Rendezvous join_as_rank(const RendezvousOptions& options);

  // Rank 0: reads rank k's next message. Others: reads the master's next message.
  std::string receive_data(int from, const char* collective, wire::Clock::time_point deadline);
  void send_data(int to, const std::string& payload, const char* collective, wire::Clock::time_point deadline);
  // Rank 0: tells the other ranks why the rendezvous failed (best effort, bounded), then throws.
  [[noreturn]] void abandon(const std::string& message);

  int rank_ = 0;
  int world_size_ = 1;
  double timeout_s_ = 300;
  std::string master_;            // "host:port", for messages
  std::vector<wire::Fd> peers_;   // by rank; rank 0 holds one per rank, the others only peers_[0]
};

}  // namespace linea::dist
