// The flag parser and the subcommand dispatch, driven as a library (no process is spawned).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tensor/error.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace linea::cli {
namespace {

// A parser with one flag of each kind, bound to fields with non-trivial defaults.
struct Fixture {
  int threads = 2;
  int64_t steps = 1000;
  uint64_t seed = 7;
  double lr = 3e-4;
  float beta = 0.9f;
  std::string out;
  bool list = false;
  bool progress = true;
  std::string model = "softmax";
  std::vector<std::string> rest;
  Flags flags{"linea demo", "A demo command."};

  Fixture() {
    flags.add("threads", &threads, "worker threads");
    flags.add("steps", &steps, "optimizer steps");
    flags.add("seed", &seed, "random seed");
    flags.add("lr", &lr, "learning rate");
    flags.add("beta", &beta, "momentum");
    flags.add("out", &out, "output file");
    flags.add("list", &list, "list only");
    flags.add("progress", &progress, "show a progress bar");
    flags.add_choice("model", &model, {"softmax", "regla"}, "attention kind");
    flags.add_rest("FILE", &rest, "inputs");
  }
  bool parse(std::vector<std::string> args) {
    std::ostringstream help;
    return flags.parse(args, help);
  }
};

// The message of the UsageError that parsing args throws, or "" when it does not throw.
std::string usage_error(std::vector<std::string> args) {
  Fixture f;
  try {
    f.parse(std::move(args));
  } catch (const UsageError& e) {
    EXPECT_EQ(e.program(), "linea demo");
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Flags, NoArgumentsKeepTheDefaults) {
  Fixture f;
  EXPECT_TRUE(f.parse({}));
  EXPECT_EQ(f.threads, 2);
  EXPECT_EQ(f.steps, 1000);
  EXPECT_EQ(f.lr, 3e-4);
  EXPECT_TRUE(f.progress);
  EXPECT_EQ(f.model, "softmax");
  EXPECT_TRUE(f.rest.empty());
  EXPECT_FALSE(f.flags.was_set("threads"));
}

TEST(Flags, BothSpellingsOfAValue) {
  Fixture f;
  EXPECT_TRUE(f.parse({"--threads", "4", "--lr=0.01", "--seed=18446744073709551615", "--steps", "-1", "--out=a=b"}));
  EXPECT_EQ(f.threads, 4);
  EXPECT_EQ(f.lr, 0.01);
  EXPECT_EQ(f.seed, UINT64_MAX);
  EXPECT_EQ(f.steps, -1);  // a negative number is a value, not a flag
  EXPECT_EQ(f.out, "a=b");  // only the first '=' separates
  EXPECT_TRUE(f.flags.was_set("threads"));
  EXPECT_FALSE(f.flags.was_set("beta"));
}

TEST(Flags, Switches) {
  Fixture f;
  EXPECT_TRUE(f.parse({"--list", "--no-progress"}));
  EXPECT_TRUE(f.list);
  EXPECT_FALSE(f.progress);
  EXPECT_TRUE(f.parse({"--list=false", "--progress=true"}));
  EXPECT_FALSE(f.list);
  EXPECT_TRUE(f.progress);
}

TEST(Flags, PositionalsAndDoubleDash) {
  Fixture f;
  EXPECT_TRUE(f.parse({"a.txt", "--list", "b.txt", "--", "--threads", "-"}));
  EXPECT_EQ(f.rest, (std::vector<std::string>{"a.txt", "b.txt", "--threads", "-"}));
  EXPECT_TRUE(f.list);
  EXPECT_EQ(f.threads, 2);
}

TEST(Flags, RequiredPositional) {
  std::string checkpoint;
  Flags flags("linea generate", "");
  flags.add_positional("CHECKPOINT", &checkpoint, "model to sample from");
  std::ostringstream help;
  EXPECT_TRUE(flags.parse(std::vector<std::string>{"model.bin"}, help));
  EXPECT_EQ(checkpoint, "model.bin");
  EXPECT_THROW(flags.parse(std::vector<std::string>{}, help), UsageError);
  EXPECT_THROW(flags.parse(std::vector<std::string>{"a", "b"}, help), UsageError);
}

TEST(Flags, BadValuesAreUsageErrors) {
  EXPECT_TRUE(contains(usage_error({"--threads", "abc"}), "--threads expects an integer, got 'abc'"));
  EXPECT_TRUE(contains(usage_error({"--threads=4x"}), "got '4x'"));
  EXPECT_TRUE(contains(usage_error({"--threads", "99999999999"}), "out of range"));
  EXPECT_TRUE(contains(usage_error({"--seed", "-1"}), "non-negative"));
  EXPECT_TRUE(contains(usage_error({"--lr", "fast"}), "--lr expects a number"));
  EXPECT_TRUE(contains(usage_error({"--lr", "nan"}), "--lr expects a number"));
  EXPECT_TRUE(contains(usage_error({"--beta", "1e300"}), "out of range"));
  EXPECT_TRUE(contains(usage_error({"--list=maybe"}), "--list expects true or false"));
  EXPECT_TRUE(contains(usage_error({"--model", "rnn"}), "must be one of softmax, regla"));
  EXPECT_TRUE(contains(usage_error({"--threads"}), "--threads needs a value"));
  EXPECT_TRUE(contains(usage_error({"--threads="}), "got ''"));
}

TEST(Flags, UnknownFlagsAreUsageErrorsWithAHint) {
  EXPECT_TRUE(contains(usage_error({"--thread", "2"}), "unknown flag --thread (did you mean --threads?)"));
  EXPECT_EQ(usage_error({"--zzzzzz"}), "linea demo: unknown flag --zzzzzz");
  EXPECT_TRUE(contains(usage_error({"-t"}), "unknown flag -t"));
  EXPECT_TRUE(contains(usage_error({"--no-threads"}), "unknown flag --no-threads"));  // not a switch
}

TEST(Flags, FailAfterParsing) {
  Fixture f;
  EXPECT_THROW(f.flags.fail("--threads must be positive"), UsageError);
}

TEST(Flags, HelpListsEveryFlagWithItsDefault) {
  for (const char* spelled : {"--help", "-h"}) {
    Fixture f;
    std::ostringstream help;
    EXPECT_FALSE(f.flags.parse(std::vector<std::string>{"--threads", "5", spelled}, help));
    const std::string text = help.str();
    EXPECT_TRUE(contains(text, "usage: linea demo [flags] [FILE...]")) << text;
    EXPECT_TRUE(contains(text, "A demo command."));
    EXPECT_TRUE(contains(text, "--threads INT"));
    EXPECT_TRUE(contains(text, "(default: 2)"));  // the default, not the value parsed before --help
    EXPECT_TRUE(contains(text, "(default: 3e-04)"));
    EXPECT_TRUE(contains(text, "(default: 0.9)"));
    EXPECT_TRUE(contains(text, "(default: 7)"));
    EXPECT_TRUE(contains(text, "--out STR"));
    EXPECT_TRUE(contains(text, "--list "));
    EXPECT_TRUE(contains(text, "--model {softmax,regla}"));
    EXPECT_TRUE(contains(text, "-h, --help"));
    EXPECT_EQ(text, f.flags.usage());
  }
}

TEST(Flags, RegisteringAFlagTwiceIsABug) {
  int a = 0, b = 0;
  Flags flags("linea demo", "");
  flags.add("n", &a, "");
  EXPECT_THROW(flags.add("n", &b, ""), std::logic_error);
  EXPECT_THROW(flags.add("help", &b, ""), std::logic_error);
}

TEST(ClosestMatch, SuggestsOnlyNearNames) {
  EXPECT_EQ(closest_match("gradchek", {"bench", "gradcheck"}), "gradcheck");
  EXPECT_EQ(closest_match("xyz", {"bench", "gradcheck"}), "");
}

// A two-command table whose commands record what they were given.
struct Table {
  std::vector<std::string> seen;
  std::vector<Command> commands;
  Table() {
    commands.push_back({"echo", "records its arguments", [this](const std::string& program, std::span<const std::string> args) {
                          seen.assign(args.begin(), args.end());
                          seen.insert(seen.begin(), program);
                          return 0;
                        }});
    commands.push_back({"throw", "fails", [](const std::string&, std::span<const std::string>) -> int {
                          throw Error("linea.matmul: shapes (2, 3) and (4, 5) do not match");
                        }});
  }
  int run(std::vector<std::string> args) { return run_main({"linea", "subcommand", commands}, args); }
};

TEST(Dispatch, RunsTheNamedCommandWithTheRest) {
  Table t;
  EXPECT_EQ(t.run({"echo", "--x", "1"}), 0);
  EXPECT_EQ(t.seen, (std::vector<std::string>{"linea echo", "--x", "1"}));
}

TEST(Dispatch, ExitStatuses) {
  Table t;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(t.run({"ech"}), kExitUsage);
  const std::string unknown = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(unknown, "linea: unknown subcommand 'ech' (did you mean 'echo'?)")) << unknown;
  EXPECT_TRUE(contains(unknown, "Run 'linea --help'"));

  ::testing::internal::CaptureStderr();
  EXPECT_EQ(t.run({"throw"}), kExitFailure);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "linea: error: linea.matmul: shapes (2, 3) and (4, 5) do not match\n");

  ::testing::internal::CaptureStdout();
  EXPECT_EQ(t.run({"--help"}), 0);
  const std::string listing = ::testing::internal::GetCapturedStdout();
  EXPECT_TRUE(contains(listing, "echo    records its arguments")) << listing;
  EXPECT_TRUE(contains(listing, "throw   fails"));
}

}  // namespace
}  // namespace linea::cli
