// The peer monitor (dist/peer_monitor.h): a clean end is no failure; a rank that ends without a
// goodbye, reports a failure, or falls silent is named to every other rank within the bounds, and
// the callback fires once. Ranks are threads over 127.0.0.1, and once a real process killed with
// SIGKILL.
#include "dist/peer_monitor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "dist/rendezvous.h"
#include "tests/dist/free_port.h"
#include "tests/dist/ranks.h"
#include "tests/test_util.h"

namespace linea::dist {
namespace {

using linea::testing::free_port;
using linea::testing::join_all;
using linea::testing::local_rendezvous;
using Clock = std::chrono::steady_clock;

// Short enough for tests: a heartbeat every 50 ms, silence is a failure after half a second.
const MonitorOptions kFast{0.05, 0.5};

std::vector<std::unique_ptr<PeerMonitor>> monitor_all(std::vector<Rendezvous> ranks,
                                                       const MonitorOptions& options = kFast) {
  std::vector<std::unique_ptr<PeerMonitor>> monitors;
  for (Rendezvous& r : ranks) monitors.push_back(std::make_unique<PeerMonitor>(std::move(r).start_monitor(options)));
  return monitors;
}

// The monitor's failure once it has one, or "" after `limit_s`.
std::string wait_for_failure(const PeerMonitor& monitor, double limit_s = 3.0) {
  const auto until = Clock::now() + std::chrono::duration<double>(limit_s);
  while (Clock::now() < until) {
    if (auto failure = monitor.failure()) return *failure;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return "";
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

TEST(PeerMonitorTest, CleanCloseOnEveryRankIsNoFailure) {
  auto monitors = monitor_all(join_all(4));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a few heartbeats
  for (const auto& m : monitors) EXPECT_FALSE(m->failure()) << *m->failure();
  // The master ends first: its goodbye makes the others stop watching, so neither the end of its
  // connection nor its silence, past the heartbeat timeout, is a failure.
  monitors[0]->close();
  monitors[0]->close();  // idempotent
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  for (const auto& m : monitors) EXPECT_FALSE(m->failure()) << *m->failure();
  for (const auto& m : monitors) m->close();
  for (const auto& m : monitors) EXPECT_FALSE(m->failure()) << *m->failure();
}

TEST(PeerMonitorTest, RanksClosingBeforeTheMasterIsNoFailure) {
  auto monitors = monitor_all(join_all(3));
  monitors[2]->close();
  monitors[1]->close();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // past the heartbeat timeout
  EXPECT_FALSE(monitors[0]->failure()) << *monitors[0]->failure();
  monitors[0]->close();
}

TEST(PeerMonitorTest, RankDestroyedWithoutCloseIsReportedAndForwarded) {
  // A long heartbeat timeout: the report must come from the connection's end, at once.
  auto monitors = monitor_all(join_all(3), MonitorOptions{0.05, 30});
  const auto start = Clock::now();
  monitors[2].reset();  // as when an exception unwinds through the run
  const std::string expected = "rank 2 exited or crashed (its connection closed)";
  EXPECT_EQ(wait_for_failure(*monitors[0]), expected);
  EXPECT_EQ(wait_for_failure(*monitors[1]), expected);  // forwarded by rank 0
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(PeerMonitorTest, MasterDestroyedWithoutCloseIsReported) {
  auto monitors = monitor_all(join_all(3), MonitorOptions{0.05, 30});
  monitors[0].reset();
  for (int rank : {1, 2})
    EXPECT_EQ(wait_for_failure(*monitors[rank]), "rank 0 (the master) exited or crashed (its connection closed)");
}

TEST(PeerMonitorTest, ReportedFailureIsForwardedVerbatim) {
  auto monitors = monitor_all(join_all(3));
  monitors[1]->report_failure("CUDA out of memory (tried to allocate 2.0 GiB)");
  const std::string expected = "rank 1 failed: CUDA out of memory (tried to allocate 2.0 GiB)";
  EXPECT_EQ(monitors[1]->failure(), expected);  // its own record
  EXPECT_EQ(wait_for_failure(*monitors[0]), expected);
  EXPECT_EQ(wait_for_failure(*monitors[2]), expected);
  // Its exit that follows changes nothing: the first failure wins.
  monitors[1].reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(monitors[0]->failure(), expected);
  EXPECT_EQ(monitors[2]->failure(), expected);
}

TEST(PeerMonitorTest, MasterReportedFailureReachesEveryRank) {
  auto monitors = monitor_all(join_all(3));
  monitors[0]->report_failure("the loss is NaN at step 12");
  monitors[0].reset();
  for (int rank : {1, 2}) EXPECT_EQ(wait_for_failure(*monitors[rank]), "rank 0 failed: the loss is NaN at step 12");
}

TEST(PeerMonitorTest, SilentRankTimesOutAndIsForwarded) {
  std::vector<Rendezvous> ranks = join_all(3);
  // Rank 2 joined but never starts its monitor: connected, and silent, like a hung process.
  Rendezvous silent = std::move(ranks[2]);
  ranks.pop_back();
  const auto start = Clock::now();
  auto monitors = monitor_all(std::move(ranks));
  const std::string expected = "rank 2 sent no heartbeat for 0.5 s: it is hung or stopped";
  EXPECT_EQ(wait_for_failure(*monitors[0]), expected);
  EXPECT_EQ(wait_for_failure(*monitors[1]), expected);
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.45);
  EXPECT_LT(elapsed, 1.5);
}

TEST(PeerMonitorTest, SilentMasterTimesOut) {
  std::vector<Rendezvous> ranks = join_all(2);
  PeerMonitor monitor = std::move(ranks[1]).start_monitor(kFast);  // rank 0 never starts one
  EXPECT_EQ(wait_for_failure(monitor), "rank 0 (the master) sent no heartbeat for 0.5 s: it is hung or stopped");
}

TEST(PeerMonitorTest, OnFailureFiresExactlyOnce) {
  auto monitors = monitor_all(join_all(3));
  std::atomic<int> calls0 = 0, calls1 = 0;
  std::mutex mutex;
  std::string message0;
  monitors[0]->on_failure([&](const std::string& message) {
    std::lock_guard lock(mutex);
    message0 = message;
    ++calls0;
  });
  monitors[1]->on_failure([&](const std::string&) { ++calls1; });
  monitors[2]->report_failure("first");
  monitors[2].reset();
  wait_for_failure(*monitors[1]);
  monitors[1]->report_failure("second");  // a later failure is sent, but fires nothing more
  monitors[1].reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // past the heartbeat timeout too
  EXPECT_EQ(calls0.load(), 1);
  EXPECT_EQ(calls1.load(), 1);
  {
    std::lock_guard lock(mutex);
    EXPECT_EQ(message0, "rank 2 failed: first");
  }
  // Set after the failure: called at once, on this thread.
  int late_calls = 0;
  std::string late;
  monitors[0]->on_failure([&](const std::string& message) {
    late = message;
    ++late_calls;
  });
  EXPECT_EQ(late_calls, 1);
  EXPECT_EQ(late, "rank 2 failed: first");
}

TEST(PeerMonitorTest, BadOptionsAreErrors) {
  EXPECT_LINEA_ERROR(PeerMonitor(0, 1, {}, MonitorOptions{0, 1}), "heartbeat interval must be positive");
  EXPECT_LINEA_ERROR(PeerMonitor(0, 1, {}, MonitorOptions{1, 1}), "must exceed the heartbeat interval");
}

TEST(PeerMonitorTest, KilledProcessIsReportedWithinSeconds) {
  const int port = free_port();
  // Forked before this process starts any thread of its own; the child is rank 1 and only ever
  // leaves through _exit (never back into the test) or SIGKILL.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(20);  // never outlive a parent that failed to kill it
    try {
      PeerMonitor monitor = Rendezvous::join(local_rendezvous(port, 1, 2)).start_monitor(kFast);
      for (;;) ::pause();
    } catch (...) {
      ::_exit(3);
    }
  }
  // A long heartbeat timeout: the report must come from the connection's end, not from silence.
  PeerMonitor monitor = Rendezvous::join(local_rendezvous(port, 0, 2)).start_monitor(MonitorOptions{0.05, 30});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(monitor.failure());
  const auto start = Clock::now();
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  EXPECT_EQ(wait_for_failure(monitor), "rank 1 exited or crashed (its connection closed)");
  EXPECT_LT(seconds_since(start), 2.0);
}

}  // namespace
}  // namespace linea::dist
