#pragma once
// A command line made of subcommands: `linea <subcommand> [args]`, and the same shape one level
// down (`linea bench <target> [args]`). A subcommand is a name, a one-line summary for the
// listing, and a function from its arguments to an exit status.
#include <functional>
#include <span>
#include <string>

namespace linea::cli {

// Exit statuses: 0 success, 1 the work failed (a linea::Error, a failed check), 2 bad usage;
// `linea train` stopped by a signal exits with 128 + its number (tools/stop_signals.h).
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct Command {
  std::string name;
  std::string summary;
  // program is how the user invoked it ("linea gradcheck"); args are the words after it.
  std::function<int(const std::string& program, std::span<const std::string> args)> run;
};

// A table of commands under one program name; noun names its entries in messages ("subcommand",
// "target").
struct CommandTable {
  std::string program;
  std::string noun;
  std::span<const Command> commands;
};

// Runs the command named by args[0] with the rest. With no args or -h/--help it prints the
// listing and returns 0; an unknown name throws UsageError.
int dispatch(const CommandTable& table, std::span<const std::string> args);

// The whole program: dispatch, plus the error policy. A UsageError prints its message and a
// pointer to --help and gives kExitUsage; any other exception prints "linea: error: <message>"
// and gives kExitFailure. Nothing escapes, so bad input never aborts.
int run_main(const CommandTable& table, std::span<const std::string> args);

}  // namespace linea::cli
