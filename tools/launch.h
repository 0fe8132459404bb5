#pragma once
// The local agent of `linea train --gpus N` (what torchrun does on each host): it starts one copy of
// a program per local rank, tells each through its environment which rank of the run it is, and
// supervises them until all have exited. A process started this way finds its place in the run with
// rank_environment().
//
// Supervision, in short:
// - SIGINT and SIGTERM that reach the launcher are forwarded to every live child; the children stop
//   cleanly by themselves (tools/stop_signals.h) and their 130 / 143 is not treated as a failure.
// - When a child fails (non-zero exit, or killed by a signal) while others still run, the launcher
//   names it on one line and gives the others grace_s seconds to notice (through NCCL they normally
//   fail on their own), then sends them SIGTERM, and SIGKILL 5 s later, naming each.
// - No zombies, no orphans: every child is reaped before launch_ranks returns or throws.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace linea::tools {

// The environment that makes a process one rank of a run. Global rank = node rank * local world
// size + local rank; the local rank is also the GPU the process uses (cuda:LOCAL_RANK).
inline constexpr char kRankVar[] = "LINEA_RANK";
inline constexpr char kLocalRankVar[] = "LINEA_LOCAL_RANK";
inline constexpr char kWorldSizeVar[] = "LINEA_WORLD_SIZE";
inline constexpr char kLocalWorldSizeVar[] = "LINEA_LOCAL_WORLD_SIZE";
inline constexpr char kMasterVar[] = "LINEA_MASTER";  // "ADDR:PORT" of the rendezvous

struct RankEnvironment {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master;
};

// This process's place in a launched run: nullopt when LINEA_RANK is unset (a plain, single-process
// run). Once LINEA_RANK is set every other variable must be too; a value that is not a non-negative
// integer, a rank outside its world, a local world larger than the world, or a master that is not
// "ADDR:PORT" is an Error naming the variable and its value.
std::optional<RankEnvironment> rank_environment();

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is the program's path, run as given (no PATH search)
  int local_ranks = 1;            // processes on this host
  int node_rank = 0;              // this host's index, 0 .. nnodes - 1
  int nnodes = 1;
  std::string master = "127.0.0.1:29500";
  double grace_s = 30.0;          // after a failure, how long the others may take to stop by themselves
  std::string program_name = "linea train";  // prefix of the launcher's lines
};

// The most processes one launcher starts: the signal handler forwards to a fixed table (a handler may
// not allocate), and a host with more GPUs than this does not exist.
inline constexpr int kMaxLocalRanks = 1024;

// Starts spec.local_ranks processes (argv[0] with argv; the LINEA_* variables above set, replacing
// any inherited ones; stdin, stdout, stderr and the current directory inherited), supervises them as
// described at the top of this file, and waits for all. Writes nothing but the launcher's own lines,
// to err (not null). Returns 0 when every child exited 0; 128 + the signal (130, 143) when the
// launcher was stopped by SIGINT or SIGTERM and the children exited with that status (or died of that
// signal); otherwise the status of the first failure (128 + the signal for a child killed by one).
// After a stop signal the launcher waits as long as the children take (a checkpoint may be slow):
// only a real failure starts the grace period.
//
// An invalid spec, a program that cannot be started (argv[0] missing or not executable: an Error
// naming it, rather than a status, since no rank ran) or a second launch_ranks running at the same
// time is an Error; children already started are then killed and reaped first. SIGINT and SIGTERM
// get the launcher's handlers only for the call (an ignored signal stays ignored, as for a
// background job); the previous dispositions come back after.
int launch_ranks(const LaunchSpec& spec, std::FILE* err);

// The path of the running program (/proc/self/exe), so that `linea train --gpus N` can start itself.
std::string self_executable();

}  // namespace linea::tools
