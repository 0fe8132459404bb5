#pragma once
// Running the real `linea` program from a test, as a user would (the CLI's end-to-end tests).
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "tests/test_util.h"

namespace linea::cli {

struct Outcome {
  int status;
  std::string output;  // stdout and stderr
};

// `linea <args>` through the shell (so args may quote and substitute), stderr joined to stdout.
inline Outcome run_linea(const std::string& args) {
  const std::string command = std::string(LINEA_CLI_PATH) + " " + args + " 2>&1";
  std::FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int raw = pclose(pipe);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, output};
}

}  // namespace linea::cli
