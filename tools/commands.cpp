#include "tools/commands.h"

#include <vector>

namespace linea::cli {

// A new subcommand is a file defining its Command and one line here.
CommandTable linea_commands() {
  static const std::vector<Command> commands = {
      train_command(),
      linearize_command(),
      eval_command(),
      generate_command(),
      tokenizer_command(),
      gradcheck_command(),
      bench_command(),
      plot_command(),
      graph_command(),
      paper_command(),
  };
  return {"linea", "subcommand", commands};
}

}  // namespace linea::cli
