#pragma once
// The communicator of data-parallel training on GPUs: NCCL, one rank per GPU, on one host or
// several. The processes find each other through a rendezvous (dist/rendezvous.h), over which
// rank 0 hands out NCCL's unique id; then NCCL builds its rings and trees over NVLink, PCIe,
// shared memory or the network, whichever connects the ranks.
//
// A data-parallel run must never hang silently. NCCL runs non-blocking here, so that nothing it
// does can keep this process from noticing a failure, and a watchdog thread looks for three
// kinds: a peer that exited or went silent (the rendezvous connections, kept open as a heartbeat:
// dist/peer_monitor.h), an error NCCL reports (ncclCommGetAsyncError), and a collective that has
// not completed within the timeout (a peer hung inside its step). It then aborts the NCCL
// communicator, which ends the kernels waiting for the lost peer, and check_healthy() (asked after
// every step) throws an Error that names what happened. The process exits with it and the last
// checkpoint, written before, stays intact. Should the process not get that far (a CUDA call stuck
// behind the lost peer), a last thread that touches neither CUDA nor NCCL ends it 15 s after the
// failure, with the same message.
#include <memory>

#include "dist/communicator.h"
#include "dist/rendezvous.h"

namespace linea::dist {

struct NcclOptions {
  double timeout_s = 900;            // a collective running longer than this is a hung peer
  double heartbeat_timeout_s = 60;   // a peer silent for this long is hung or stopped
};

// False in a build without NCCL (LINEA_NCCL=OFF), where make_nccl_communicator throws.
bool nccl_available();

// Sets NCCL_NVLS_ENABLE=0 unless the user set it: NVLink multicast stays off, since on a host whose
// GPUs are shared a program using it can put them out of service for others. Call it before the
// process starts threads (setenv is not safe beside a getenv running elsewhere).
void keep_nvlink_multicast_off();

// The NCCL communicator of this process's rank, on `device` (a CUDA device), over the processes
// that joined `rendezvous`. Collective: every rank calls it.
std::unique_ptr<Communicator> make_nccl_communicator(Rendezvous&& rendezvous, Device device,
                                                     const NcclOptions& options = {});

}  // namespace linea::dist
