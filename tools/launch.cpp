#include "tools/launch.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tensor/error.h"

extern char** environ;

namespace linea::tools {

namespace {

constexpr char kOp[] = "launch";
using Clock = std::chrono::steady_clock;
// How often the launcher looks at its children. waitpid cannot wait with a deadline, and a SIGCHLD
// handler would change the process's dispositions for everyone; 50 polls a second cost nothing.
constexpr auto kPollInterval = std::chrono::milliseconds(20);
// Between the SIGTERM that ends the grace period and the SIGKILL.
constexpr double kKillAfterTermS = 5.0;

// ---- the rank environment -------------------------------------------------------------------

std::string required_variable(const char* name) {
  const char* value = std::getenv(name);
  LINEA_CHECK(value != nullptr, kOp, name, " is not set, but ", kRankVar, " is: a process started as one rank of a run "
              "needs ", kRankVar, ", ", kLocalRankVar, ", ", kWorldSizeVar, ", ", kLocalWorldSizeVar, " and ",
              kMasterVar);
  return value;
}

// The whole text must be the number: "2x" or " 2" is a typo to report, not a 2.
bool parse_int(const std::string& text, int& n) {
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, n);
  return !text.empty() && error == std::errc() && stop == end;
}

int count_variable(const char* name) {
  const std::string value = required_variable(name);
  int n = 0;
  LINEA_CHECK(parse_int(value, n) && n >= 0, kOp, name, "='", value, "' is not a non-negative integer");
  return n;
}

// "ADDR:PORT", the address possibly an IPv6 one in brackets (hence the last colon).
void check_master(const char* what, const std::string& master) {
  const size_t colon = master.rfind(':');
  int port = 0;
  const bool ok = colon != std::string::npos && colon > 0 && parse_int(master.substr(colon + 1), port) && port >= 1 &&
                  port <= 65535;
  LINEA_CHECK(ok, kOp, what, "='", master, "' is not ADDR:PORT (a host name or address, a colon, a port 1-65535)");
}

bool is_rank_variable(const char* entry) {
  for (const char* name : {kRankVar, kLocalRankVar, kWorldSizeVar, kLocalWorldSizeVar, kMasterVar}) {
    const size_t n = std::strlen(name);
    if (std::strncmp(entry, name, n) == 0 && entry[n] == '=') return true;
  }
  return false;
}

// The launcher's environment with this rank's LINEA_* variables in place of any it inherited (a
// launcher started from inside a launched run must not pass its own rank on).
std::vector<std::string> child_environment(const LaunchSpec& spec, int local_rank) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry)
    if (!is_rank_variable(*entry)) env.emplace_back(*entry);
  const int rank = spec.node_rank * spec.local_ranks + local_rank;
  env.push_back(std::string(kRankVar) + "=" + std::to_string(rank));
  env.push_back(std::string(kLocalRankVar) + "=" + std::to_string(local_rank));
  env.push_back(std::string(kWorldSizeVar) + "=" + std::to_string(spec.nnodes * spec.local_ranks));
  env.push_back(std::string(kLocalWorldSizeVar) + "=" + std::to_string(spec.local_ranks));
  env.push_back(std::string(kMasterVar) + "=" + spec.master);
  return env;
}

// What execve wants: pointers into the strings, then a null.
std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

void check_spec(const LaunchSpec& spec, std::FILE* err) {
  LINEA_CHECK(err != nullptr, kOp, "no stream for the launcher's messages");
  LINEA_CHECK(!spec.argv.empty() && !spec.argv[0].empty(), kOp, "no program to start for ", spec.program_name);
  LINEA_CHECK(spec.local_ranks >= 1 && spec.local_ranks <= kMaxLocalRanks, kOp, "the processes per host must be 1 to ",
              kMaxLocalRanks, ", not ", spec.local_ranks);
  LINEA_CHECK(spec.nnodes >= 1 && spec.nnodes <= (1 << 30) / spec.local_ranks, kOp, "the number of hosts must be at "
              "least 1 (and the world size fit an int), not ", spec.nnodes);
  LINEA_CHECK(spec.node_rank >= 0 && spec.node_rank < spec.nnodes, kOp, "the node rank must be 0 to ",
              spec.nnodes - 1, " for ", spec.nnodes, " hosts, not ", spec.node_rank);
  LINEA_CHECK(std::isfinite(spec.grace_s) && spec.grace_s >= 0, kOp, "the grace period must be a non-negative "
              "number of seconds, not ", spec.grace_s);
  check_master("the master", spec.master);
}

// ---- signal forwarding ----------------------------------------------------------------------

// Shared with the handler, so at namespace scope and of fixed size (a handler may not allocate), as
// lock-free atomics (any thread may take the signal). A slot holds a live child's pid, 0 otherwise;
// a child's slot is cleared before it is reaped, so the handler never signals a pid the system may
// already have handed to another process.
std::atomic<pid_t> g_children[kMaxLocalRanks];
std::atomic<int> g_child_slots{0};
std::atomic<int> g_first_signal{0};
std::atomic<unsigned> g_signals_seen{0};  // bit s: signal s reached the launcher
std::atomic<bool> g_active{false};
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free &&
              std::atomic<unsigned>::is_always_lock_free);

constexpr int kForwarded[] = {SIGINT, SIGTERM};

// Only async-signal-safe work: atomics and kill.
extern "C" void forward_signal(int signal) {
  const int saved_errno = errno;
  int none = 0;
  g_first_signal.compare_exchange_strong(none, signal);
  g_signals_seen.fetch_or(1u << signal);
  const int slots = g_child_slots.load();
  for (int i = 0; i < slots; ++i)
    if (const pid_t pid = g_children[i].load(); pid > 0) ::kill(pid, signal);
  errno = saved_errno;
}

bool ignored(const struct sigaction& action) {
  return !(action.sa_flags & SA_SIGINFO) && action.sa_handler == SIG_IGN;
}

// The launcher's dispositions for one launch_ranks: SIGINT and SIGTERM forwarded (unless ignored:
// a background job's SIGINT stays ignored, here and in the children), and SIGCHLD at its default,
// since with SIGCHLD ignored the kernel reaps children itself and their exit statuses are lost.
class Dispositions {
 public:
  Dispositions() {
    LINEA_CHECK(!g_active.exchange(true), kOp, "another launch_ranks is already running in this process");
    g_child_slots.store(0);
    g_first_signal.store(0);
    g_signals_seen.store(0);
    struct sigaction action = {};
    action.sa_handler = forward_signal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    for (const int signal : kForwarded) sigaddset(&action.sa_mask, signal);
    for (int i = 0; i < 2; ++i) {
      if (::sigaction(kForwarded[i], nullptr, &previous_[i]) != 0 || ignored(previous_[i])) continue;
      installed_[i] = ::sigaction(kForwarded[i], &action, nullptr) == 0;
    }
    if (::sigaction(SIGCHLD, nullptr, &previous_child_) == 0 &&
        (ignored(previous_child_) || (previous_child_.sa_flags & SA_NOCLDWAIT))) {
      struct sigaction default_action = {};
      default_action.sa_handler = SIG_DFL;
      sigemptyset(&default_action.sa_mask);
      child_reset_ = ::sigaction(SIGCHLD, &default_action, nullptr) == 0;
    }
  }
  ~Dispositions() {
    for (int i = 0; i < 2; ++i)
      if (installed_[i]) ::sigaction(kForwarded[i], &previous_[i], nullptr);
    if (child_reset_) ::sigaction(SIGCHLD, &previous_child_, nullptr);
    g_child_slots.store(0);
    g_active.store(false);
  }
  Dispositions(const Dispositions&) = delete;
  Dispositions& operator=(const Dispositions&) = delete;

 private:
  struct sigaction previous_[2] = {};
  bool installed_[2] = {false, false};
  struct sigaction previous_child_ = {};
  bool child_reset_ = false;
};

// ---- supervision ----------------------------------------------------------------------------

// 0 for a clean exit, the exit code, or 128 + the signal that killed it (the shell's convention).
int exit_status(int raw) { return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw); }

std::string describe(int raw) {
  if (WIFEXITED(raw)) return "exited with status " + std::to_string(WEXITSTATUS(raw));
  const int signal = WTERMSIG(raw);
  return "was killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
}

Clock::time_point seconds_from_now(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

struct Child {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = 0;
  bool running = false;
  int raw_status = 0;
};

class Supervisor {
 public:
  Supervisor(const LaunchSpec& spec, std::FILE* err) : spec_(spec), err_(err) {
    children_.reserve(spec.local_ranks);
    for (int i = 0; i < spec.local_ranks; ++i) g_children[i].store(0);
    g_child_slots.store(spec.local_ranks);
  }
  // Only reached with children running when an error unwinds launch_ranks: none may outlive it.
  ~Supervisor() {
    for (Child& child : children_)
      if (child.running) {
        g_children[child.local_rank].store(0);
        ::kill(child.pid, SIGKILL);
        int raw = 0;
        while (::waitpid(child.pid, &raw, 0) < 0 && errno == EINTR) {}
      }
  }
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts the ranks in order; a stop signal that arrives meanwhile ends the starting.
  void start_all() {
    for (int local_rank = 0; local_rank < spec_.local_ranks && g_first_signal.load() == 0; ++local_rank)
      start(local_rank);
  }

  int wait_all() {
    while (running_ > 0) {
      for (Child& child : children_)
        if (child.running && has_exited(child)) reap(child);
      if (running_ == 0) break;
      escalate();
      std::this_thread::sleep_for(kPollInterval);
    }
    if (first_failure_ >= 0) return exit_status(children_[first_failure_].raw_status);
    if (stop_status_ != 0) return stop_status_;
    if (children_.empty() && g_first_signal.load() != 0) return 128 + g_first_signal.load();  // stopped before any
    return 0;
  }

 private:
  void start(int local_rank) {
    std::vector<std::string> argv = spec_.argv, env = child_environment(spec_, local_rank);
    std::vector<char*> argv_pointers = c_strings(argv), env_pointers = c_strings(env);
    // posix_spawn rather than fork + exec: glibc's reports a failed exec as its return value, and
    // runs the child with signals blocked until the exec, so the launcher's handler never runs there.
    // The children start with no signal blocked whatever the calling thread blocks: the launcher's
    // SIGTERM must reach them.
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
    pid_t pid = 0;
    const int error = posix_spawn(&pid, argv[0].c_str(), nullptr, &attributes, argv_pointers.data(),
                                  env_pointers.data());
    posix_spawnattr_destroy(&attributes);
    const int rank = spec_.node_rank * spec_.local_ranks + local_rank;
    LINEA_CHECK(error == 0, kOp, "cannot start rank ", rank, " of ", spec_.program_name, ": '", argv[0],
                "': ", std::strerror(error));
    children_.push_back({local_rank, rank, pid, true, 0});
    ++running_;
    g_children[local_rank].store(pid);
    // A signal that came while this child was being started was forwarded to the others only.
    if (const int signal = g_first_signal.load(); signal != 0) ::kill(pid, signal);
  }

  // Without reaping it (WNOWAIT), so that the pid stays ours until its slot is cleared.
  bool has_exited(const Child& child) {
    siginfo_t info = {};
    while (::waitid(P_PID, child.pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0)
      LINEA_CHECK(errno == EINTR, kOp, "rank ", child.rank, " (pid ", child.pid, ") of ", spec_.program_name,
                  " cannot be waited for: ", std::strerror(errno));
    return info.si_pid == child.pid;
  }

  void reap(Child& child) {
    g_children[child.local_rank].store(0);
    while (::waitpid(child.pid, &child.raw_status, 0) < 0 && errno == EINTR) {}
    child.running = false;
    --running_;
    const int status = exit_status(child.raw_status);
    if (status == 0) return;
    if (stopped_by_signal(status)) {
      if (stop_status_ == 0) stop_status_ = status;
      return;
    }
    if (first_failure_ >= 0) return;  // the first failure's consequences: it is the one to report
    first_failure_ = static_cast<int>(&child - children_.data());
    if (running_ == 0) return;  // the last one: its own error and the exit status say it all
    std::fprintf(err_, "%s: rank %d (pid %d) %s\n", spec_.program_name.c_str(), child.rank,
                 static_cast<int>(child.pid), describe(child.raw_status).c_str());
    std::fflush(err_);
    terminate_at_ = seconds_from_now(spec_.grace_s);
  }

  // 130 or 143 after that signal reached the launcher and was forwarded: the child stopped as asked.
  static bool stopped_by_signal(int status) {
    const int signal = status - 128;
    return signal > 0 && signal < 32 && (g_signals_seen.load() & (1u << signal)) != 0;
  }

  // After a failure: SIGTERM to the others once the grace period is over, SIGKILL 5 s after that.
  void escalate() {
    if (first_failure_ < 0 || stage_ == 2 || Clock::now() < terminate_at_) return;
    const Child& failed = children_[first_failure_];
    for (const Child& child : children_) {
      if (!child.running) continue;
      if (stage_ == 0)
        std::fprintf(err_, "%s: rank %d (pid %d) did not stop within %g s of rank %d's failure; terminating it\n",
                     spec_.program_name.c_str(), child.rank, static_cast<int>(child.pid), spec_.grace_s, failed.rank);
      else
        std::fprintf(err_, "%s: rank %d (pid %d) is still running %g s after SIGTERM; killing it\n",
                     spec_.program_name.c_str(), child.rank, static_cast<int>(child.pid), kKillAfterTermS);
      ::kill(child.pid, stage_ == 0 ? SIGTERM : SIGKILL);
    }
    std::fflush(err_);
    ++stage_;
    terminate_at_ = seconds_from_now(kKillAfterTermS);
  }

  const LaunchSpec& spec_;
  std::FILE* err_;
  std::vector<Child> children_;
  int running_ = 0;
  int first_failure_ = -1;  // index into children_
  int stop_status_ = 0;     // the first 130 / 143 of a child stopped by a forwarded signal
  int stage_ = 0;           // after a failure: 0 waiting out the grace, 1 SIGTERM sent, 2 SIGKILL sent
  Clock::time_point terminate_at_;
};

}  // namespace

std::optional<RankEnvironment> rank_environment() {
  if (std::getenv(kRankVar) == nullptr) return std::nullopt;
  RankEnvironment env;
  env.rank = count_variable(kRankVar);
  env.local_rank = count_variable(kLocalRankVar);
  env.world_size = count_variable(kWorldSizeVar);
  env.local_world_size = count_variable(kLocalWorldSizeVar);
  env.master = required_variable(kMasterVar);
  LINEA_CHECK(env.world_size >= 1, kOp, kWorldSizeVar, "='", env.world_size, "' must be at least 1");
  LINEA_CHECK(env.rank < env.world_size, kOp, kRankVar, "='", env.rank, "' is not below ", kWorldSizeVar, "='",
              env.world_size, "'");
  LINEA_CHECK(env.local_world_size >= 1 && env.local_world_size <= env.world_size, kOp, kLocalWorldSizeVar, "='",
              env.local_world_size, "' must be 1 to ", kWorldSizeVar, "='", env.world_size, "'");
  LINEA_CHECK(env.local_rank < env.local_world_size, kOp, kLocalRankVar, "='", env.local_rank, "' is not below ",
              kLocalWorldSizeVar, "='", env.local_world_size, "'");
  check_master(kMasterVar, env.master);
  return env;
}

int launch_ranks(const LaunchSpec& spec, std::FILE* err) {
  check_spec(spec, err);
  const Dispositions dispositions;
  Supervisor supervisor(spec, err);  // destroyed first: children are reaped while signals still forward
  supervisor.start_all();
  return supervisor.wait_all();
}

std::string self_executable() {
  std::string path(256, '\0');
  while (true) {
    const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size());
    LINEA_CHECK(n >= 0, kOp, "cannot read /proc/self/exe: ", std::strerror(errno));
    if (static_cast<size_t>(n) < path.size()) return path.substr(0, static_cast<size_t>(n));
    path.resize(path.size() * 2);  // it may have been cut short
  }
}

}  // namespace linea::tools
