// StopSignals in this process: once armed a signal becomes a flag, repeats are absorbed; before,
// it goes where it went before; an ignored signal stays ignored; the dispositions found are put
// back. raise() runs the handler before it returns, so each check is deterministic.
#include <gtest/gtest.h>

#include <csignal>

#include "tools/stop_signals.h"

namespace linea::cli {
namespace {

volatile std::sig_atomic_t g_previous_handler_calls = 0;
extern "C" void count_previous_handler(int) { g_previous_handler_calls = g_previous_handler_calls + 1; }

// Sets a signal's disposition for the test's duration and restores the original afterwards.
class Disposition {
 public:
  Disposition(int signal, void (*handler)(int)) : signal_(signal) {
    struct sigaction action = {};
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    EXPECT_EQ(sigaction(signal, &action, &original_), 0);
  }
  ~Disposition() { sigaction(signal_, &original_, nullptr); }

 private:
  int signal_;
  struct sigaction original_ = {};
};

void (*current_handler(int signal))(int) {
  struct sigaction now = {};
  sigaction(signal, nullptr, &now);
  return now.sa_handler;
}

TEST(StopSignals, SignalsBecomeAFlagAndThePreviousHandlersComeBack) {
  const Disposition on_int(SIGINT, count_previous_handler), on_term(SIGTERM, count_previous_handler);
  g_previous_handler_calls = 0;
  {
    StopSignals stop;
    stop.arm();
    EXPECT_FALSE(stop.requested());
    std::raise(SIGINT);
    EXPECT_TRUE(stop.requested());
    EXPECT_EQ(stop.received(), SIGINT);
    std::raise(SIGTERM);  // a repeat while stopping: absorbed, the first signal is kept
    std::raise(SIGINT);
    EXPECT_EQ(stop.received(), SIGINT);
    EXPECT_EQ(g_previous_handler_calls, 0);
  }
  EXPECT_EQ(current_handler(SIGINT), count_previous_handler);
  EXPECT_EQ(current_handler(SIGTERM), count_previous_handler);
  std::raise(SIGTERM);
  EXPECT_EQ(g_previous_handler_calls, 1);

  StopSignals again;  // a fresh one starts clear
  again.arm();
  EXPECT_FALSE(again.requested());
  std::raise(SIGTERM);
  EXPECT_EQ(again.received(), SIGTERM);
}

// Before arm() (`linea train` still reading its corpus) a signal has its old effect, which for
// SIGINT is normally the end of the process; here it is a counting handler.
TEST(StopSignals, BeforeArmingASignalGoesToThePreviousHandler) {
  const Disposition on_int(SIGINT, count_previous_handler), on_term(SIGTERM, count_previous_handler);
  g_previous_handler_calls = 0;
  StopSignals stop;
  std::raise(SIGINT);
  EXPECT_EQ(g_previous_handler_calls, 1);
  EXPECT_FALSE(stop.requested());
  stop.arm();
  std::raise(SIGTERM);
  EXPECT_EQ(g_previous_handler_calls, 1);
  EXPECT_EQ(stop.received(), SIGTERM);
}

TEST(StopSignals, AnIgnoredSignalStaysIgnored) {
  const Disposition on_int(SIGINT, count_previous_handler), on_term(SIGTERM, SIG_IGN);
  {
    StopSignals stop;
    stop.arm();
    EXPECT_EQ(current_handler(SIGTERM), SIG_IGN);
    std::raise(SIGTERM);
    EXPECT_FALSE(stop.requested());
  }
  EXPECT_EQ(current_handler(SIGTERM), SIG_IGN);
}

TEST(StopSignals, ExitStatusesAndNames) {
  EXPECT_EQ(exit_status_for_signal(SIGINT), 130);
  EXPECT_EQ(exit_status_for_signal(SIGTERM), 143);
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
}

}  // namespace
}  // namespace linea::cli
