#pragma once
// The flag parser every `linea` subcommand uses. A flag is bound to a variable whose value when
// the flag is added is its default, so a subcommand's config struct states its defaults once:
//
//   TrainConfig cfg;
//   Flags flags("linea train", "Trains a language model.");
//   flags.add("lr", &cfg.lr, "peak learning rate");
//   flags.add("compile-check", &cfg.check, "run the gradient check first");  // bool: a switch
//   flags.add_choice("model", &cfg.model, {"softmax", "regla"}, "attention kind");
//   flags.add_rest("FILE", &cfg.files, "text files to train on");
//   if (!flags.parse(args)) return 0;  // --help was printed
//
// Accepted: --name value, --name=value, switches as --name, --name=true|false and --no-name,
// -h/--help, and `--` to end the flags. Anything wrong (an unknown flag, a value that does not
// parse, a missing argument) throws UsageError, which `linea` turns into exit status 2.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace linea::cli {

// Bad command-line input: the message says what was wrong, program says whose --help to read.
class UsageError : public std::runtime_error {
 public:
  UsageError(std::string program, const std::string& message)
      : std::runtime_error(message), program_(std::move(program)) {}
  const std::string& program() const { return program_; }

 private:
  std::string program_;
};

class Flags {
 public:
  // program is how the user invokes it ("linea gradcheck"); description follows the usage line.
  Flags(std::string program, std::string description);

  // Value flags. The variable must outlive parse(); its current value is the default.
  void add(const std::string& name, int* value, const std::string& help);
  void add(const std::string& name, int64_t* value, const std::string& help);
  void add(const std::string& name, uint64_t* value, const std::string& help);
  void add(const std::string& name, double* value, const std::string& help);
  void add(const std::string& name, float* value, const std::string& help);
  void add(const std::string& name, std::string* value, const std::string& help);
  // A switch: --name sets it, --no-name clears it.
  void add(const std::string& name, bool* value, const std::string& help);
  // A string that must be one of choices.
  void add_choice(const std::string& name, std::string* value, std::vector<std::string> choices,
                  const std::string& help);

  // A required positional argument; they are filled in the order they were added.
  void add_positional(const std::string& name, std::string* value, const std::string& help);
  // Zero or more positional arguments after the required ones.
  void add_rest(const std::string& name, std::vector<std::string>* values, const std::string& help);

  // Fills the bound variables from args (the words after the subcommand). Returns false when
  // -h/--help was given: the usage was written to help_out and the caller should stop.
  bool parse(std::span<const std::string> args, std::ostream& help_out);
  bool parse(std::span<const std::string> args);  // help to stdout

  // True when the user gave the flag (as opposed to keeping its default); asking about a name
  // that is not a flag is a programming error (std::logic_error).
  bool was_set(const std::string& name) const;
  bool has(const std::string& name) const;  // whether name is one of the flags

  std::string usage() const;
  const std::string& program() const { return program_; }
  // For checks a subcommand makes after parsing (e.g. --threads must be positive).
  [[noreturn]] void fail(const std::string& message) const;

 private:
  struct Flag {
    std::string name;
    std::string metavar;  // "INT", "{a,b}"; empty for a switch
    std::string help;
    std::string default_text;
    std::function<void(const std::string& text)> set;  // throws std::invalid_argument on bad text
    bool is_switch = false;
    bool seen = false;
  };
  struct Positional {
    std::string name;
    std::string help;
    std::function<void(const std::string&)> set;
  };

  void add_flag(Flag flag);
  Flag* find(const std::string& name);
  void set_flag(Flag& flag, const std::string& spelled, const std::string& text);

  std::string program_;
  std::string description_;
  std::vector<Flag> flags_;
  std::vector<Positional> positionals_;
  Positional rest_;  // rest_.set is empty when there is none
};

// "a, b, c" from {"a", "b", "c"} and ", ".
std::string join(const std::vector<std::string>& words, const std::string& separator);

// The candidate nearest to word by edit distance, or "" when none is close: for "did you mean".
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace linea::cli
