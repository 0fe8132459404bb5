// `linea bench attention` at a tiny shape on the CPU, run as a user runs it: one JSON line per
// length with both timings; bad flags refused by name with the usage error's status.
#include <string>

#include "nn/json.h"
#include "tests/test_util.h"
#include "tests/tools/run_linea.h"

namespace linea::cli {
namespace {

TEST(CliBenchAttention, PrintsOneLinePerLength) {
  const Outcome o = run_linea("bench attention --device cpu --lengths 9,33 --batch 1 --heads 2 --head-dim 8 "
                              "--window 4 --repeats 1 --threads 1");
  ASSERT_EQ(o.status, 0) << o.output;
  const size_t newline = o.output.find('\n');
  ASSERT_NE(newline, std::string::npos) << o.output;
  const json::Value first = json::parse(o.output.substr(0, newline));
  const json::Value second = json::parse(o.output.substr(newline + 1, o.output.find('\n', newline + 1) - newline - 1));
  EXPECT_EQ(first.at("T").get<int64_t>(), 9);
  EXPECT_EQ(second.at("T").get<int64_t>(), 33);
  for (const json::Value* line : {&first, &second}) {
    EXPECT_GT(line->at("fwd_bwd_ms").get<double>(), 0.0) << line->dump();
    EXPECT_GT(line->at("fwd_ms").get<double>(), 0.0) << line->dump();
    EXPECT_EQ(line->at("window").get<int64_t>(), 4);
    EXPECT_EQ(line->at("threads").get<int64_t>(), 1);
  }
}

TEST(CliBenchAttention, TimesBfloat16) {
  const Outcome o = run_linea("bench attention --device cpu --lengths 17 --batch 1 --heads 2 --head-dim 8 "
                              "--dtype bfloat16 --repeats 1 --threads 1");
  ASSERT_EQ(o.status, 0) << o.output;
  const json::Value line = json::parse(o.output.substr(0, o.output.find('\n')));
  EXPECT_EQ(line.at("dtype").get<std::string>(), "bfloat16");
  EXPECT_GT(line.at("fwd_bwd_ms").get<double>(), 0.0) << line.dump();
}

TEST(CliBenchAttention, RefusesBadFlags) {
  const std::string tiny = "bench attention --device cpu --lengths 8 --batch 1 --heads 1 --head-dim 4 ";
  for (const auto& [flags, message] : {std::pair<std::string, std::string>{"--repeats 0", "--repeats must be at least 1"},
                                       {"--threads 0", "--threads must be at least 1"},
                                       {"--batch 0", "--batch, --heads and --head-dim must be at least 1"},
                                       {"--head-dim -1", "--batch, --heads and --head-dim must be at least 1"},
                                       {"--window -2", "--window must be 0"},
                                       {"--lengths 8,0", "lengths"},
                                       {"--dtype float16", "--dtype"}}) {
    const Outcome o = run_linea(tiny + flags);
    EXPECT_EQ(o.status, 2) << flags << ": " << o.output;
    EXPECT_NE(o.output.find(message), std::string::npos) << flags << ": " << o.output;
  }
}

}  // namespace
}  // namespace linea::cli
