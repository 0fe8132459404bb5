#include "tools/scale_out.h"

#include "dist/endpoint.h"
#include "dist/nccl_communicator.h"
#include "dist/rendezvous.h"

namespace linea::cli {

void add_scale_out_flags(Flags& f, ScaleOut& s) {
  f.add("gpus", &s.gpus, "data-parallel on this many GPUs of this host, one process each (NCCL)");
  f.add("nnodes", &s.nnodes, "hosts taking part; run the same command on each, with its --node-rank");
  f.add("node-rank", &s.node_rank, "this host's index among --nnodes, 0 on the host of --master");
  f.add("master", &s.master, "ADDR:PORT where rank 0's host listens for the others (the rendezvous)");
  f.add("dist-timeout", &s.timeout_s, "seconds to wait for the rendezvous, or for a collective before a rank counts as hung");
}

bool should_launch(const ScaleOut& s, const Flags& flags) {
  if (tools::rank_environment()) return false;  // a rank started by the launcher trains
  if (!flags.was_set("gpus") && !flags.was_set("nnodes")) return false;
  if (s.gpus < 1) flags.fail("--gpus must be at least 1, got " + std::to_string(s.gpus));
  if (s.nnodes < 1) flags.fail("--nnodes must be at least 1, got " + std::to_string(s.nnodes));
  if (s.node_rank < 0 || s.node_rank >= s.nnodes)
    flags.fail("--node-rank must be in [0, " + std::to_string(s.nnodes) + "), got " + std::to_string(s.node_rank));
  if (s.timeout_s <= 0) flags.fail("--dist-timeout must be > 0 seconds");
  dist::parse_endpoint(s.master, "--master");  // a bad address fails here, once, not in every rank
  LINEA_CHECK(dist::nccl_available(), "train", "--gpus/--nnodes need NCCL, and this build of linea has none ",
              "(configure with LINEA_CUDA=ON where nccl.h and libnccl are found, or set NCCL_ROOT)");
  return true;
}

int launch_local_ranks(const ScaleOut& s, const std::vector<std::string>& command, std::span<const std::string> args) {
  tools::LaunchSpec spec;
  spec.argv = {tools::self_executable()};
  spec.argv.insert(spec.argv.end(), command.begin(), command.end());
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.local_ranks = static_cast<int>(s.gpus);
  spec.node_rank = static_cast<int>(s.node_rank);
  spec.nnodes = static_cast<int>(s.nnodes);
  spec.master = s.master;
  spec.program_name = "linea";
  for (const std::string& word : command) spec.program_name += " " + word;
  return tools::launch_ranks(spec, stderr);
}

std::unique_ptr<dist::Communicator> join_run(const tools::RankEnvironment& env, const ScaleOut& s) {
  dist::keep_nvlink_multicast_off();
  dist::Rendezvous rendezvous = dist::Rendezvous::join(
      {.master = dist::parse_endpoint(env.master, "LINEA_MASTER"), .rank = env.rank, .world_size = env.world_size,
       .timeout_s = s.timeout_s});
  return dist::make_nccl_communicator(std::move(rendezvous), Device{DeviceKind::CUDA, env.local_rank},
                                      {.timeout_s = s.timeout_s});
}

}  // namespace linea::cli
