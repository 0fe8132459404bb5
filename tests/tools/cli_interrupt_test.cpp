// `linea train` stopped by a signal, as Ctrl-C (SIGINT) or a job scheduler (SIGTERM) stops it: the
// run finishes its step, saves a checkpoint of it, prints the command that resumes it and exits
// with 128 + the signal's number; that command, run as printed, picks the run up at that step.
//
// The program runs as a child process whose output the test reads as it comes. The signal is
// sent only once a step line has been read (so the handlers are in place) and the run is far too
// long to end by itself first, so the test does not depend on timing; every wait has a deadline
// after which the child is killed and the test fails.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nn/json.h"
#include "tests/train/temp_dir.h"
#include "train/checkpoint.h"
#include "train/file_io.h"

extern char** environ;

namespace linea::cli {
namespace {

using linea::testing::TempDir;
using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kPatience{120};  // generous: sanitizer builds on a busy machine

// A child process with its stdout and stderr in one pipe.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv) {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    // Whatever this process inherited (a shell leaves SIGINT ignored in background jobs), the
    // child starts with SIGINT and SIGTERM at their defaults and no signal blocked.
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t defaults, none;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int error = posix_spawn(&pid_, argv[0].c_str(), &actions, &attributes, args.data(), environ);
    EXPECT_EQ(error, 0) << "cannot start " << argv[0];
    if (error != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    ::close(fds[1]);  // the child holds the write end now: end of file means it has exited
    fd_ = fds[0];
  }
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(fd_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Reads until a whole line of output matches pattern and returns it; "" at end of output or
  // when the deadline passes.
  std::string wait_for_line(const std::regex& pattern) {
    const auto deadline = Clock::now() + kPatience;
    for (;;) {
      for (size_t end; (end = output_.find('\n', scanned_)) != std::string::npos;) {
        const std::string line = output_.substr(scanned_, end - scanned_);
        scanned_ = end + 1;
        if (std::regex_match(line, pattern)) return line;
      }
      if (!read_some(deadline)) return "";
    }
  }

  void send(int signal) const {
    if (pid_ > 0) ::kill(pid_, signal);  // never kill(-1): that would signal every process we may
  }

  // Reads the rest of the output, then reaps the child: its exit status, or -1 when it was killed
  // by a signal or missed the deadline (and was killed then).
  int finish() {
    if (pid_ <= 0) return -1;  // not started, or reaped already
    const auto deadline = Clock::now() + kPatience;
    while (read_some(deadline)) {
    }
    int raw = 0;
    while (::waitpid(pid_, &raw, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &raw, 0);
        pid_ = -1;
        ADD_FAILURE() << "the child did not exit in time";
        return -1;
      }
      ::usleep(10000);
    }
    pid_ = -1;
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }

  const std::string& output() const { return output_; }

 private:
  // Appends what the child has written; false at end of output or past the deadline.
  bool read_some(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p = {fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) return true;
    if (ready <= 0) return false;
    char buffer[4096];
    const ssize_t n = ::read(fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) return true;
    if (n <= 0) return false;
    output_.append(buffer, static_cast<size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string output_;
  size_t scanned_ = 0;  // where the next unread line starts
};

// What the stop message says: "stopped by <SIGNAL> after step <N> of <M>; checkpoint <DIR>" and,
// two lines down, the command that resumes the run.
struct Stop {
  std::string signal;
  int64_t step = -1;
  std::string checkpoint;
  std::string resume_command;
};

Stop parse_stop(const std::string& output) {
  std::smatch m;
  const std::regex message(R"(linea train: stopped by (SIG[A-Z]+) after step ([0-9]+) of [0-9]+; checkpoint (\S+)\nresume with:\n  (.+)\n)");
  if (!std::regex_search(output, m, message)) return {};
  return {m[1], std::stoll(m[2]), m[3], m[4]};
}

std::string checkpoint_dir(const std::string& run, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "/step-%08lld", static_cast<long long>(step));
  return run + name;
}

// The steps of the run's log.jsonl, in the order logged.
std::vector<int64_t> logged_steps(const std::string& run) {
  std::vector<int64_t> steps;
  std::istringstream in(train::read_file(run + "/log.jsonl", "log"));
  for (std::string line; std::getline(in, line);) {
    const json::Value r = json::parse(line);
    if (json::get<std::string>(r, "kind") == "step") steps.push_back(json::get<int64_t>(r, "step"));
  }
  return steps;
}

// Checks the run stopped by `signal` with exit status `status`, at a checkpoint of the step it
// names that loads and that LATEST points at; returns that step.
int64_t expect_stopped_at_a_checkpoint(Child& child, const std::string& run, int signal, const char* name) {
  const int status = child.finish();
  EXPECT_EQ(status, 128 + signal) << child.output();
  EXPECT_NE(child.output().find(std::string("linea: ") + name + " received"), std::string::npos) << child.output();
  const Stop stop = parse_stop(child.output());
  EXPECT_EQ(stop.signal, name) << child.output();
  EXPECT_EQ(stop.checkpoint, checkpoint_dir(run, stop.step));
  EXPECT_EQ(train::latest_checkpoint(run), stop.checkpoint);
  if (stop.step >= 0) {
    const train::Checkpoint ck = train::load_checkpoint(stop.checkpoint);
    EXPECT_EQ(ck.trainer.step, stop.step);
  }
  // Every step up to the stop was logged once, including across a resume.
  std::vector<int64_t> expected;
  for (int64_t s = 1; s <= stop.step; ++s) expected.push_back(s);
  EXPECT_EQ(logged_steps(run), expected);
  return stop.step;
}

std::regex step_line(int64_t step) { return std::regex("step " + std::to_string(step) + "/1000000 .*"); }

TEST(CliInterrupt, SigintSavesTheStepAndThePrintedCommandResumesIt) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the quick brown fox " + std::to_string(i % 7) + " jumps over the lazy dog.\n";
  train::write_file_atomically(dir / "corpus.txt", text);
  const std::string run = dir / "run";
  // A million steps: it ends only by the signal. Progress lines every step (--log-every 1), a
  // short validation every 5 steps and a checkpoint every 4, so the signal may land in a step, an
  // evaluation or just after a save: each must end the same way.
  Child train({LINEA_CLI_PATH, "train", "--data", dir / "corpus.txt", "--cache-dir", "none", "--model", "RS",
               "--d-model", "16", "--heads", "2", "--batch", "2", "--seq", "16", "--steps", "1000000", "--warmup", "1",
               "--eval-every", "5", "--eval-batches", "2", "--save-every", "4", "--log-every", "1",
               "--sample-tokens", "0", "--out", run});
  ASSERT_NE(train.wait_for_line(step_line(3)), "") << train.output();
  train.send(SIGINT);
  const int64_t stopped_at = expect_stopped_at_a_checkpoint(train, run, SIGINT, "SIGINT");
  EXPECT_GE(stopped_at, 3);
  const Stop stop = parse_stop(train.output());
  EXPECT_NE(stop.resume_command.find(" train --resume --out "), std::string::npos) << stop.resume_command;

  // The printed command, as a user would paste it (exec: the signal goes to linea, not the shell).
  Child resumed({"/bin/sh", "-c", "exec " + stop.resume_command});
  ASSERT_NE(resumed.wait_for_line(std::regex(".*resuming from step " + std::to_string(stopped_at))), "")
      << resumed.output();
  ASSERT_NE(resumed.wait_for_line(step_line(stopped_at + 2)), "") << resumed.output();
  resumed.send(SIGTERM);
  EXPECT_GE(expect_stopped_at_a_checkpoint(resumed, run, SIGTERM, "SIGTERM"), stopped_at + 2);
}

}  // namespace
}  // namespace linea::cli
