// `linea gradcheck [OP...]`: runs the rows of the gradient-check table, the same rows the test
// suite runs, and reports each one.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <exception>
#include <set>
#include <vector>

#include "autograd/gradcheck_cases.h"
#include "nn/gradcheck_cases.h"
#include "tools/commands.h"
#include "tools/flags.h"

namespace linea::cli {

namespace {

using gradcheck::Case;

// Every source of cases, in one place: nn adds its module cases here.
// Every row: the ops of autograd/, then the modules of nn/ (the same rows the test suite runs).
std::vector<Case> all_cases() {
  std::vector<Case> cases = gradcheck::op_cases();
  for (Case& c : nn::module_cases()) cases.push_back(std::move(c));
  return cases;
}

// The cases whose op or full name is one of the words; a word that matches nothing is an error
// that names the known ops, since a typo must not pass as "0 passed, 0 failed".
std::vector<Case> select_cases(std::vector<Case> cases, const std::vector<std::string>& words, const Flags& flags) {
  if (words.empty()) return cases;
  std::set<std::string> known_ops;
  for (const Case& c : cases) known_ops.insert(c.op);
  for (const std::string& w : words) {
    const bool matches = std::any_of(cases.begin(), cases.end(), [&](const Case& c) { return c.op == w || c.name == w; });
    if (matches) continue;
    flags.fail("no gradient-check case for '" + w + "'; known ops: " +
               join(std::vector<std::string>(known_ops.begin(), known_ops.end()), " "));
  }
  std::erase_if(cases, [&](const Case& c) {
    return std::find(words.begin(), words.end(), c.op) == words.end() &&
           std::find(words.begin(), words.end(), c.name) == words.end();
  });
  return cases;
}

// A case that throws (an op not implemented, a shape error in the case itself) fails with the
// message as its detail instead of ending the run.
gradcheck::Result run_guarded(const Case& c, uint64_t seed) {
  try {
    return gradcheck::run_case(c, seed);
  } catch (const std::exception& e) {
    gradcheck::Result failed;
    failed.worst_error = INFINITY;
    failed.detail = std::string("threw: ") + e.what();
    return failed;
  }
}

// Every line of text, indented under its case.
void print_indented(const std::string& text) {
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::printf("    %s\n", text.substr(start, end - start).c_str());
    start = end + 1;
  }
}

// One row of the report; a failure adds its detail, indented, on the lines below.
void print_result(const Case& c, const gradcheck::Result& r, int width) {
  std::printf("%-*s  %-6s  %11.3e  %9" PRId64 "\n", width, c.name.c_str(), r.passed ? "PASS" : "FAIL", r.worst_error,
              r.compared);
  if (!r.passed && std::isfinite(r.worst_error) && r.worst_error > c.options.tolerance) {
    char tolerance[48];
    std::snprintf(tolerance, sizeof tolerance, "above the tolerance %.1e at ", c.options.tolerance);
    print_indented(tolerance + r.detail);
  } else if (!r.passed) {
    print_indented(r.detail);
  }
  std::fflush(stdout);  // a slow case should not hide the lines before it
}

int run(const std::string& program, std::span<const std::string> args) {
  uint64_t seed = 1;
  bool list = false;
  std::vector<std::string> ops;
  Flags flags(program,
              "Checks autograd's derivatives against float64 central finite differences, one line per\n"
              "case of the gradient-check table (the rows the test suite runs). Exits 1 when any fails.");
  flags.add("seed", &seed, "seed of each case's random inputs");
  flags.add("list", &list, "print the case names and exit");
  flags.add_rest("OP", &ops, "ops (or full case names, e.g. matmul/batch_broadcast) to check; default all");
  if (!flags.parse(args)) return 0;

  const std::vector<Case> cases = select_cases(all_cases(), ops, flags);
  if (list) {
    for (const Case& c : cases) std::printf("%s\n", c.name.c_str());
    return 0;
  }
  int width = 4;
  for (const Case& c : cases) width = std::max(width, static_cast<int>(c.name.size()));
  std::printf("%-*s  %-6s  %11s  %9s\n", width, "case", "result", "worst error", "compared");
  int passed = 0, failed = 0;
  for (const Case& c : cases) {
    const gradcheck::Result r = run_guarded(c, seed);
    print_result(c, r, width);
    (r.passed ? passed : failed) += 1;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed > 0 ? kExitFailure : 0;
}

}  // namespace

Command gradcheck_command() {
  return {"gradcheck", "check every op's gradient against finite differences", run};
}

}  // namespace linea::cli
