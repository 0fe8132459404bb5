#include "tools/command.h"

#include <algorithm>
#include <iostream>
#include <vector>

#include "tools/flags.h"

namespace linea::cli {

namespace {

void print_listing(const CommandTable& table, std::ostream& os) {
  size_t width = 0;
  for (const Command& c : table.commands) width = std::max(width, c.name.size());
  os << "usage: " << table.program << " <" << table.noun << "> [flags] [args]\n\n" << table.noun << "s:\n";
  for (const Command& c : table.commands)
    os << "  " << c.name << std::string(width - c.name.size() + 3, ' ') << c.summary << "\n";
  os << "\nRun '" << table.program << " <" << table.noun << "> --help' for its flags.\n";
}

}  // namespace

int dispatch(const CommandTable& table, std::span<const std::string> args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    print_listing(table, std::cout);
    return 0;
  }
  const std::string& name = args[0];
  std::vector<std::string> names;
  for (const Command& c : table.commands) {
    if (c.name == name) return c.run(table.program + " " + name, args.subspan(1));
    names.push_back(c.name);
  }
  const std::string hint = closest_match(name, names);
  std::string message = table.program + ": unknown " + table.noun + " '" + name + "'";
  if (!hint.empty()) message += " (did you mean '" + hint + "'?)";
  throw UsageError(table.program, message + "; known: " + join(names, ", "));
}

int run_main(const CommandTable& table, std::span<const std::string> args) {
  try {
    return dispatch(table, args);
  } catch (const UsageError& e) {
    std::cerr << e.what() << "\nRun '" << e.program() << " --help' for usage.\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    // linea::Error messages already name the op ("linea.matmul: ..."); other exceptions
    // (bad_alloc, a file that cannot be written) are reported the same way.
    std::cerr << "linea: error: " << e.what() << "\n";
    return kExitFailure;
  } catch (...) {
    std::cerr << "linea: error: unknown exception\n";
    return kExitFailure;
  }
}

}  // namespace linea::cli
