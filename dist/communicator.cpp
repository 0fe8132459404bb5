#include "dist/communicator.h"

#include <algorithm>

#include "tensor/creation.h"
#include "tensor/transfer.h"

namespace linea::dist {

std::vector<double> all_reduce_sum(Communicator& comm, const std::vector<double>& values) {
  if (values.empty()) return {};
  Tensor host = empty({static_cast<int64_t>(values.size())}, kFloat64, Device::cpu());
  std::copy(values.begin(), values.end(), host.data<double>());
  Tensor buffer = copy_to(host, comm.device());
  comm.all_reduce(buffer, Reduction::Sum);
  const Tensor back = copy_to(buffer, Device::cpu());
  comm.check_healthy();  // a peer that died leaves garbage behind: believe no number before asking
  return std::vector<double>(back.data<double>(), back.data<double>() + values.size());
}

void barrier(Communicator& comm) { all_reduce_sum(comm, {1.0}); }

}  // namespace linea::dist
