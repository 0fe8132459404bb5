#include "tools/stop_signals.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "tensor/error.h"

namespace linea::cli {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM};
constexpr int kCount = 2;

// Shared with the handler, so at namespace scope (there is one StopSignals at a time). Any thread
// may take the signal, so the flags are atomics (a volatile sig_atomic_t is only safe within one
// thread), lock-free ones, which a handler may use. The dispositions found are written before the
// handlers are installed and only read after.
std::atomic<int> g_received{0};
std::atomic<bool> g_armed{false};
std::atomic<bool> g_active{false};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<bool>::is_always_lock_free);
struct sigaction g_previous[kCount];
bool g_installed[kCount];

int index_of(int signal) { return signal == kSignals[0] ? 0 : 1; }

// Only async-signal-safe work here: atomics, sigaction, raise and write.
extern "C" void on_stop_signal(int signal) {
  const int saved_errno = errno;  // write() may change it under the interrupted code's feet
  if (!g_armed.load()) {
    // Nothing to save yet: the signal does what it did before we came. It is blocked while this
    // handler runs, so raise() leaves it pending until the handler returns.
    ::sigaction(signal, &g_previous[index_of(signal)], nullptr);
    ::raise(signal);
  } else if (int none = 0; g_received.compare_exchange_strong(none, signal)) {  // repeats: already stopping
    static constexpr char kInt[] =
        "\nlinea: SIGINT received: finishing the current step, then saving a checkpoint (further signals are ignored)\n";
    static constexpr char kTerm[] =
        "\nlinea: SIGTERM received: finishing the current step, then saving a checkpoint (further signals are ignored)\n";
    if (signal == SIGINT) (void)!::write(STDERR_FILENO, kInt, sizeof kInt - 1);
    else (void)!::write(STDERR_FILENO, kTerm, sizeof kTerm - 1);
  }
  errno = saved_errno;
}

}  // namespace

StopSignals::StopSignals() {
  LINEA_CHECK(!g_active.exchange(true), "StopSignals", "only one StopSignals may be installed at a time");
  g_received.store(0);
  g_armed.store(false);
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (const int signal : kSignals) sigaddset(&action.sa_mask, signal);  // no handler interrupts another
  for (int i = 0; i < kCount; ++i) {
    g_installed[i] = false;
    if (::sigaction(kSignals[i], nullptr, &g_previous[i]) != 0) continue;
    const bool ignored = !(g_previous[i].sa_flags & SA_SIGINFO) && g_previous[i].sa_handler == SIG_IGN;
    if (ignored) continue;  // ignored by whoever started us: keep it so
    g_installed[i] = ::sigaction(kSignals[i], &action, nullptr) == 0;
  }
}

StopSignals::~StopSignals() {
  for (int i = 0; i < kCount; ++i)
    if (g_installed[i]) ::sigaction(kSignals[i], &g_previous[i], nullptr);
  g_armed.store(false);
  g_active.store(false);
}

void StopSignals::arm() { g_armed.store(true); }

int StopSignals::received() const { return g_received.load(); }

std::string signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal);
}

}  // namespace linea::cli
