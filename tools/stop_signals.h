#pragma once
// Ctrl-C (SIGINT) and SIGTERM as a request to stop cleanly instead of dying at once. While a
// StopSignals object lives and once it is armed, either signal only sets a flag (a lock-free
// atomic, which is what a signal handler may safely touch) and writes one fixed line to stderr;
// the work polls requested() where stopping is safe (`linea train`: between steps and between
// evaluation batches), writes what it must and returns, and the command exits with
// exit_status_for_signal().
//
// - Until arm() the signals keep the effect they had (normally: the process ends at once). A
//   command arms when there is something worth saving: `linea train` when its training loop
//   first polls, so Ctrl-C while it reads and tokenizes the corpus still quits immediately.
// - Further signals while the work winds down are ignored, so a second Ctrl-C during the final
//   checkpoint cannot cut it short. (Even a SIGKILL then would lose nothing: checkpoints are
//   written to a temporary directory and renamed into place, train/checkpoint.h.)
// - A signal that was ignored when the object was made (SIG_IGN, as a shell leaves SIGINT for a
//   background job) stays ignored.
// - The handlers are installed with SA_RESTART, so a system call in progress (a checkpoint's
//   write or fsync) resumes rather than failing with EINTR.
// - The destructor puts back the dispositions it found. One StopSignals at a time.
#include <csignal>
#include <string>

namespace linea::cli {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // From now on a signal is a stop request. Cheap and idempotent: it may be called at every poll.
  void arm();
  bool requested() const { return received() != 0; }
  // The first signal that arrived once armed (SIGINT or SIGTERM), or 0.
  int received() const;
};

// Runs work(should_stop) while a StopSignals lives (its handlers only for the work's duration, the
// ones found put back after): should_stop() arms it at its first call, so the work decides from
// when a signal is a stop request, and says whether one came. `signal` gets the signal received
// (0: none); returns what the work returned.
template <class Work>
auto run_stoppable(Work&& work, int& signal) {
  StopSignals stop_signals;
  auto result = work([&stop_signals] {
    stop_signals.arm();
    return stop_signals.requested();
  });
  signal = stop_signals.received();
  return result;
}

// The shell's convention for a program ended by a signal: 128 + its number (130 for SIGINT, 143
// for SIGTERM).
inline int exit_status_for_signal(int signal) { return 128 + signal; }

// "SIGINT", "SIGTERM", or "signal N".
std::string signal_name(int signal);

}  // namespace linea::cli
