// `linea <subcommand> [args]`: everything but argv handling lives in linea_cli_lib, so the tests
// can drive the same code.
#include <string>
#include <vector>

#include "cpu/blas_core.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  linea::cpu::reexec_with_better_openblas_core(argv);  // see cpu/blas_core.h
  const std::vector<std::string> args(argv + 1, argv + argc);
  return linea::cli::run_main(linea::cli::linea_commands(), args);
}
