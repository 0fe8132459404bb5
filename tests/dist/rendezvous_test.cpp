// The rendezvous (dist/rendezvous.h): ranks as threads over 127.0.0.1. Joining, the collectives
// with payloads of any bytes, a master that starts late, and every way a rendezvous can go wrong
// ending in an error that names the rank or the flag at fault, within the timeout.
#include "dist/rendezvous.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "dist/endpoint.h"
#include "tests/dist/free_port.h"
#include "tests/dist/ranks.h"
#include "tests/test_util.h"

namespace linea::dist {
namespace {

using linea::testing::free_port;
using linea::testing::join_all;
using linea::testing::local_rendezvous;
using linea::testing::run_threads;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(EndpointTest, ParsesHostnamesIpv4AndBracketedIpv6) {
  const Endpoint a = parse_endpoint("10.0.0.1:29500", "--master");
  EXPECT_EQ(a.host, "10.0.0.1");
  EXPECT_EQ(a.port, 29500);
  EXPECT_EQ(a.str(), "10.0.0.1:29500");
  const Endpoint b = parse_endpoint("node-3.cluster:1", "--master");
  EXPECT_EQ(b.host, "node-3.cluster");
  EXPECT_EQ(b.port, 1);
  const Endpoint c = parse_endpoint("[::1]:65535", "--master");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 65535);
  EXPECT_EQ(c.str(), "[::1]:65535");  // parses back
  EXPECT_EQ(parse_endpoint(c.str(), "--master").host, "::1");
}

TEST(EndpointTest, MalformedTextIsAnErrorNamingTheFlagAndTheText) {
  for (const char* text : {"", "10.0.0.1", ":29500", "host:", "host:0", "host:65536", "host:12ab", "host:+80",
                           "host: 80", "host:0029500", "::1:29500", "[::1]29500", "[::1:29500", "[]:80"}) {
    SCOPED_TRACE(text);
    const std::string quoted = "\"" + std::string(text) + "\"";
    EXPECT_LINEA_ERROR(parse_endpoint(text, "--master"), "linea.endpoint", "--master", quoted.c_str());
  }
  EXPECT_LINEA_ERROR(parse_endpoint("host:99999", "--master"), "not an integer in 1..65535");
  EXPECT_LINEA_ERROR(parse_endpoint("::1:80", "--master"), "in brackets");
}

TEST(RendezvousTest, WorldOfOneNeedsNoSocket) {
  // No master address at all: a single process must not need one.
  Rendezvous alone = Rendezvous::join(RendezvousOptions{});
  EXPECT_EQ(alone.rank(), 0);
  EXPECT_EQ(alone.world_size(), 1);
  EXPECT_EQ(alone.all_gather("x"), std::vector<std::string>{"x"});
  EXPECT_EQ(alone.broadcast("id"), "id");
  alone.barrier();
  PeerMonitor monitor = std::move(alone).start_monitor(MonitorOptions{});
  EXPECT_FALSE(monitor.failure());
  monitor.close();
}

TEST(RendezvousTest, FourRanksGatherBroadcastAndBarrier) {
  constexpr int kWorld = 4;
  std::vector<Rendezvous> ranks = join_all(kWorld);
  std::mt19937 rng(20240611);
  // Contributions of any bytes and sizes, empty and 100 KB ones included; the 128-byte root value
  // stands for NCCL's unique id, which is binary and holds NUL bytes.
  std::vector<std::vector<std::string>> gathered(3, std::vector<std::string>(kWorld));
  for (auto& round : gathered)
    for (std::string& s : round) {
      const size_t size = std::uniform_int_distribution<size_t>(0, 4)(rng) == 0 ? 0 : rng() % 100'000;
      for (size_t i = 0; i < size; ++i) s.push_back(static_cast<char>(rng()));
    }
  std::string id(128, '\0');
  for (size_t i = 0; i < id.size(); i += 2) id[i] = static_cast<char>(rng());
  std::vector<std::vector<std::vector<std::string>>> got(kWorld);
  std::vector<std::string> ids(kWorld);
  const auto errors = run_threads(kWorld, [&](int rank) {
    Rendezvous& r = ranks[rank];
    EXPECT_EQ(r.rank(), rank);
    EXPECT_EQ(r.world_size(), kWorld);
    for (const auto& round : gathered) {
      got[rank].push_back(r.all_gather(round[rank]));
      r.barrier();
    }
    ids[rank] = r.broadcast(rank == 0 ? id : "ignored");
  });
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    EXPECT_EQ(got[rank], gathered) << "rank " << rank;
    EXPECT_EQ(ids[rank], id) << "rank " << rank;
  }
}

TEST(RendezvousTest, RankThatStartsBeforeTheMasterRetries) {
  const int port = free_port();
  std::string value;
  std::thread early([&] {
    Rendezvous r = Rendezvous::join(local_rendezvous(port, 1, 2));
    value = r.broadcast("");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // several refused attempts
  Rendezvous master = Rendezvous::join(local_rendezvous(port, 0, 2));
  master.broadcast("late master");
  early.join();
  EXPECT_EQ(value, "late master");
}

TEST(RendezvousTest, MissingRanksTimeOutNamingThem) {
  const int port = free_port();
  const auto start = std::chrono::steady_clock::now();
  // Ranks 2 and 3 of 4 never come.
  const auto errors = run_threads(2, [&](int rank) { Rendezvous::join(local_rendezvous(port, rank, 4, 1.0)); });
  const std::string expected = "after 1 s, ranks 2, 3 of 4 had not joined the rendezvous at 127.0.0.1:" +
                               std::to_string(port);
  EXPECT_NE(errors[0].find(expected), std::string::npos) << errors[0];
  // Rank 1 waits a little longer than its timeout for rank 0's verdict, which names the culprits.
  EXPECT_NE(errors[1].find(expected), std::string::npos) << errors[1];
  EXPECT_LT(seconds_since(start), 4.0);
}

TEST(RendezvousTest, SingleMissingRankIsNamed) {
  const int port = free_port();
  EXPECT_LINEA_ERROR(Rendezvous::join(local_rendezvous(port, 0, 2, 0.3)),
                     "after 0.3 s, rank 1 of 2 had not joined the rendezvous at 127.0.0.1:");
}

TEST(RendezvousTest, UnreachableMasterTimesOut) {
  const int port = free_port();
  const auto start = std::chrono::steady_clock::now();
  const std::string expected = "could not reach the master 127.0.0.1:" + std::to_string(port) + " within 0.5 s";
  EXPECT_LINEA_ERROR(Rendezvous::join(local_rendezvous(port, 1, 2, 0.5)), expected.c_str());
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(RendezvousTest, TwoProcessesClaimingOneRankIsAnError) {
  const int port = free_port();
  // Threads 1 and 2 both say they are rank 1 of 3: whichever comes second is the duplicate.
  const auto errors = run_threads(3, [&](int thread) {
    Rendezvous::join(local_rendezvous(port, thread == 2 ? 1 : thread, 3));
  });
  for (int thread = 0; thread < 3; ++thread)
    EXPECT_NE(errors[thread].find("two processes claim rank 1"), std::string::npos) << thread << ": " << errors[thread];
}

TEST(RendezvousTest, RankOutsideTheMastersWorldIsAnError) {
  const int port = free_port();
  // Rank 3 of 4 knocks on the door of a rendezvous of 2.
  const auto errors = run_threads(2, [&](int thread) {
    Rendezvous::join(local_rendezvous(port, thread == 0 ? 0 : 3, thread == 0 ? 2 : 4));
  });
  for (const std::string& error : errors)
    EXPECT_NE(error.find("rank 3 joined a rendezvous of 2 ranks"), std::string::npos) << error;
}

TEST(RendezvousTest, MismatchedWorldSizeIsAnError) {
  const int port = free_port();
  const auto errors =
      run_threads(2, [&](int rank) { Rendezvous::join(local_rendezvous(port, rank, rank == 0 ? 2 : 3)); });
  for (const std::string& error : errors)
    EXPECT_NE(error.find("rank 1 was started with a world size of 3, rank 0 with 2"), std::string::npos) << error;
}

TEST(RendezvousTest, BadOptionsAreErrors) {
  EXPECT_LINEA_ERROR(Rendezvous::join(local_rendezvous(1, 2, 2)), "rank 2 is outside a world of 2 ranks");
  EXPECT_LINEA_ERROR(Rendezvous::join(local_rendezvous(1, -1, 2)), "rank -1 is outside");
  EXPECT_LINEA_ERROR(Rendezvous::join(local_rendezvous(1, 0, 0)), "world size must be at least 1");
  EXPECT_LINEA_ERROR(Rendezvous::join(local_rendezvous(1, 0, 2, 0)), "timeout must be positive");
  EXPECT_LINEA_ERROR(Rendezvous::join(RendezvousOptions{Endpoint{}, 1, 2, 1}), "needs a master ADDR:PORT");
}

TEST(RendezvousTest, RankThatLeavesDuringACollectiveIsNamed) {
  std::vector<Rendezvous> ranks = join_all(3);
  { Rendezvous gone = std::move(ranks[2]); }  // closes its connection
  const auto errors = run_threads(2, [&](int rank) { ranks[rank].all_gather("x"); });
  // Rank 0 sees the end of the connection; rank 1 learns it from rank 0.
  for (const std::string& error : errors)
    EXPECT_NE(error.find("rank 2 closed its connection during the rendezvous"), std::string::npos) << error;
}

TEST(RendezvousTest, SilentRankInACollectiveTimesOut) {
  std::vector<Rendezvous> ranks = join_all(2, 0.5);
  const auto start = std::chrono::steady_clock::now();
  // Rank 1 never calls all_gather.
  EXPECT_LINEA_ERROR(ranks[0].all_gather("x"), "rank 1 sent nothing for 0.5 s during the rendezvous (all_gather)");
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(RendezvousTest, ConnectionsGoToTheMonitor) {
  std::vector<Rendezvous> ranks = join_all(2);
  PeerMonitor monitor = std::move(ranks[1]).start_monitor(MonitorOptions{});
  EXPECT_LINEA_ERROR(ranks[1].barrier(), "went to a peer monitor");
  monitor.close();
}

}  // namespace
}  // namespace linea::dist
