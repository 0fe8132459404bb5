// `linea bench scan --what kernel` at a short length on the CPU, run as a user runs it: a JSON
// line per gate and state pass, each naming its pass; a pass it does not know, given by flag or by
// LINEA_SCAN_STATES, refused by name.
#include <cstdlib>
#include <string>
#include <vector>

#include "nn/json.h"
#include "tests/test_util.h"
#include "tests/tools/run_linea.h"

namespace linea::cli {
namespace {

std::vector<json::Value> json_lines(const std::string& output) {
  std::vector<json::Value> lines;
  for (size_t start = 0, end; (end = output.find('\n', start)) != std::string::npos; start = end + 1)
    lines.push_back(json::parse(output.substr(start, end - start)));
  return lines;
}

TEST(CliBenchScan, TimesEachStatePassInTurn) {
  const Outcome o = run_linea("bench scan --device cpu --what kernel --lengths 9 --algorithms chunked "
                              "--state-passes kernels,chain,auto --repeats 1 --threads 1");
  ASSERT_EQ(o.status, 0) << o.output;
  const std::vector<json::Value> lines = json_lines(o.output);
  ASSERT_EQ(lines.size(), 6u) << o.output;
  const char* expected[][2] = {{"gla", "kernels"},   {"gla", "chain"},   {"gla", "auto"},
                               {"regla", "kernels"}, {"regla", "chain"}, {"regla", "auto"}};
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].at("gate").get<std::string>(), expected[i][0]) << lines[i].dump();
    EXPECT_EQ(lines[i].at("state_pass").get<std::string>(), expected[i][1]) << lines[i].dump();
    EXPECT_EQ(lines[i].at("T").get<int64_t>(), 9);
    EXPECT_GT(lines[i].at("fwd_bwd_ms").get<double>(), 0.0) << lines[i].dump();
  }
}

TEST(CliBenchScan, RefusesAStatePassItDoesNotKnow) {
  const Outcome o = run_linea("bench scan --device cpu --what kernel --lengths 9 --state-passes kernels,chian");
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("--state-passes takes auto, kernels and chain, got 'chian'"), std::string::npos) << o.output;
}

#ifdef LINEA_WITH_CUDA
// The CUDA build reads the default pass from LINEA_SCAN_STATES, and refuses a value it does not
// know rather than running the other pass.
TEST(CliBenchScan, RefusesAScanStatesSettingItDoesNotKnow) {
  ::setenv("LINEA_SCAN_STATES", "chian", 1);  // the program started below inherits it
  const Outcome o = run_linea("bench scan --device cpu --what kernel --lengths 9 --repeats 1");
  ::unsetenv("LINEA_SCAN_STATES");
  EXPECT_EQ(o.status, 1) << o.output;
  EXPECT_NE(o.output.find("LINEA_SCAN_STATES must be 'auto', 'kernels' or 'chain', got 'chian'"), std::string::npos)
      << o.output;
}
#endif

}  // namespace
}  // namespace linea::cli
