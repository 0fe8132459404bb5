// The NCCL communicator on the GPU machines (CI has no GPU: these skip there, as does a build
// without NCCL). One GPU runs a world of one rank, which still goes through the rendezvous, NCCL's
// init, the side stream and the close; two or more GPUs run one rank per GPU as threads of this
// process, each with its own communicator, as NCCL allows.
#include <thread>

#include "cuda/memory.h"
#include "dist/nccl_communicator.h"
#include "dist/rendezvous.h"
#include "tests/dist/free_port.h"
#include "tests/test_util.h"
#include "tensor/transfer.h"

namespace linea::dist {
namespace {

#define LINEA_SKIP_WITHOUT_NCCL()                                                         \
  do {                                                                                    \
    LINEA_SKIP_WITHOUT_CUDA();                                                            \
    if (!nccl_available()) GTEST_SKIP() << "built without NCCL (LINEA_NCCL=OFF): skipped"; \
  } while (0)

// Runs body(comm) on `world` threads, rank r on cuda:r, all joined through one rendezvous.
void run_gpu_ranks(int world, const std::function<void(Communicator& comm)>& body) {
  keep_nvlink_multicast_off();
  const int port = linea::testing::free_port();
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        Rendezvous rendezvous = Rendezvous::join({.master = {"127.0.0.1", port}, .rank = r, .world_size = world,
                                                  .timeout_s = 60});
        std::unique_ptr<Communicator> comm =
            make_nccl_communicator(std::move(rendezvous), Device{DeviceKind::CUDA, r}, {.timeout_s = 60});
        body(*comm);
        comm->close();
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// rank r's contribution: fixed random values by (r, seed).
Tensor contribution(int rank, int64_t n, DType dtype, uint64_t seed) {
  Generator gen(seed * 131 + rank);
  return randn({n}, {dtype}, &gen);
}

// Every rank ends with the sum (or the mean) of the contributions, the same bits on every rank.
void expect_reduction_of_contributions(int world, DType dtype, int64_t n, bool side,
                                       Reduction op = Reduction::Sum) {
  std::vector<std::vector<double>> got(world);
  run_gpu_ranks(world, [&](Communicator& comm) {
    const Tensor buffer = copy_to(contribution(comm.rank(), n, dtype, n), comm.device());
    if (side) {
      comm.start_side_all_reduce(buffer, op);
      comm.wait_side_reductions();
    } else {
      comm.all_reduce(buffer, op);
    }
    got[comm.rank()] = to(copy_to(buffer, kCPU), kFloat64).to_vector<double>();
  });
  std::vector<double> expected(n, 0.0);
  for (int r = 0; r < world; ++r) {
    const std::vector<double> c = to(contribution(r, n, dtype, n), kFloat64).to_vector<double>();
    for (int64_t i = 0; i < n; ++i) expected[i] += c[i];
  }
  if (op == Reduction::Mean)
    for (double& e : expected) e /= world;
  const double tolerance = dtype == kFloat32 ? 1e-5 : 1e-12;
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(got[r].size(), static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[r][i], expected[i], tolerance * (1 + std::abs(expected[i])));
    EXPECT_EQ(got[r], got[0]) << "every rank must hold the same sum, bit for bit";
  }
}

TEST(Nccl, OneRankLeavesTheBufferAndClosesCleanly) {
  LINEA_SKIP_WITHOUT_NCCL();
  for (int64_t n : {1, 1000, 262147}) expect_reduction_of_contributions(1, kFloat32, n, false);
  expect_reduction_of_contributions(1, kFloat64, 4099, true);
  expect_reduction_of_contributions(1, kFloat32, 1000, true, Reduction::Mean);
  run_gpu_ranks(1, [](Communicator& comm) {
    EXPECT_EQ(all_reduce_sum(comm, {2.5, -1.0}), (std::vector<double>{2.5, -1.0}));
    barrier(comm);
    EXPECT_THROW(comm.all_reduce(zeros({3}, {kFloat32}), Reduction::Sum), Error) << "a CPU tensor";
    EXPECT_THROW(comm.all_reduce(zeros({3}, {kInt64, comm.device()}), Reduction::Mean), Error) << "not a float";
  });
}

TEST(Nccl, RanksOnSeveralGpusSumAtAwkwardSizes) {
  LINEA_SKIP_WITHOUT_NCCL();
  const int gpus = cuda::device_count();
  if (gpus < 2) GTEST_SKIP() << "one GPU: the sums across GPUs need two or more";
  for (int64_t n : {1, 7, 1000, 1 << 20 | 3}) {
    expect_reduction_of_contributions(gpus, kFloat32, n, false);
    expect_reduction_of_contributions(gpus, kFloat32, n, true);
  }
  expect_reduction_of_contributions(gpus, kFloat64, 4099, false);
  // The mean, as data-parallel training takes it (ncclAvg): within rounding of the sum / world.
  for (int64_t n : {3, 1 << 20 | 5}) expect_reduction_of_contributions(gpus, kFloat32, n, true, Reduction::Mean);
  expect_reduction_of_contributions(gpus, kFloat64, 4099, false, Reduction::Mean);
}

}  // namespace
}  // namespace linea::dist
