// The NCCL communicator in a build without NCCL (LINEA_NCCL=OFF): it says so.
#include "dist/nccl_communicator.h"

namespace linea::dist {

bool nccl_available() { return false; }

void keep_nvlink_multicast_off() {}

std::unique_ptr<Communicator> make_nccl_communicator(Rendezvous&&, Device device, const NcclOptions&) {
  LINEA_CHECK(false, "nccl", "this build of linea has no NCCL, so it cannot train on several GPUs or hosts ",
              "(configure with LINEA_CUDA=ON where nccl.h and libnccl are found, or set NCCL_ROOT)");
  return nullptr;
}

}  // namespace linea::dist
