#pragma once
// `linea train` on several GPUs and hosts. One command starts the run: on one host
//
//   linea train --gpus 4 ...
//
// and across hosts the same command on each, told where rank 0's host listens:
//
//   linea train --gpus 4 --nnodes 2 --node-rank 0 --master 10.0.0.1:29500 ...   (on host 0)
//   linea train --gpus 4 --nnodes 2 --node-rank 1 --master 10.0.0.1:29500 ...   (on host 1)
//
// The command given --gpus (or --nnodes) does not train: like torchrun's agent, it starts one
// copy of linea per local GPU with the same arguments and the environment that makes each a rank
// (tools/launch.h), watches them, and exits with their status. Each copy joins the rendezvous at
// --master, then NCCL (dist/nccl_communicator.h), and runs train_model as one rank.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "tools/flags.h"
#include "tools/launch.h"

namespace linea::cli {

struct ScaleOut {
  int64_t gpus = 0;       // processes (GPUs) on this host; 0: train in this process, as always
  int64_t nnodes = 1;     // hosts
  int64_t node_rank = 0;  // this host's index among them
  std::string master = "127.0.0.1:29500";  // rank 0's host and a free port there
  double timeout_s = 900;  // rendezvous, and a collective that takes longer means a hung rank
};

void add_scale_out_flags(Flags& f, ScaleOut& s);

// True when this invocation should start ranks rather than train: --gpus or --nnodes given, and
// the process is not itself a rank. Checks the flags' values (UsageError through flags).
bool should_launch(const ScaleOut& s, const Flags& flags);

// Starts the local ranks of `linea <command words> args...` (`train`, or `bench train`) and waits
// for them (tools/launch.h).
int launch_local_ranks(const ScaleOut& s, const std::vector<std::string>& command, std::span<const std::string> args);

// In a rank's process: joins the rendezvous and NCCL as tools::rank_environment() says.
std::unique_ptr<dist::Communicator> join_run(const tools::RankEnvironment& env, const ScaleOut& s);

}  // namespace linea::cli
