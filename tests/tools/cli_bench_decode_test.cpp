// `linea bench decode` at a tiny shape, run as a user runs it: one JSON line per letter and
// context holding every measurement, the decoding state flat in the context for the recurrent
// letters and growing with it for softmax's KV cache; bad flags refused.
#include <algorithm>
#include <map>
#include <string>

#include "nn/json.h"
#include "tests/test_util.h"
#include "tests/tools/run_linea.h"

namespace linea::cli {
namespace {

TEST(CliBenchDecode, PrintsEveryMeasurementPerLetterAndContext) {
  const Outcome o = run_linea("bench decode --device cpu --letters S,R,F,G --contexts 5,40 --batches 1,3 --vocab 11 "
                              "--d-model 16 --layers 2 --heads 2 --mlp-hidden 24 --decode-tokens 3 --repeats 1 "
                              "--warmup 0 --threads 1 --compare-steps");
  ASSERT_EQ(o.status, 0) << o.output;
  std::map<std::string, json::Value> lines;  // by letter and context
  for (size_t start = 0; start < o.output.size();) {
    const size_t end = std::min(o.output.find('\n', start), o.output.size());
    const json::Value line = json::parse(o.output.substr(start, end - start));
    lines[line.at("letter").get<std::string>() + std::to_string(line.at("context").get<int64_t>())] = line;
    start = end + 1;
  }
  ASSERT_EQ(lines.size(), 8u) << o.output;
  for (const auto& [key, line] : lines) {
    for (const char* field : {"prefill_ms", "prefill_tok_s", "forward_ms", "prompt_steps_ms", "prefill_speedup",
                              "state_mib", "decode_b1_tok_s", "decode_b1_ms_per_step", "decode_b3_tok_s"})
      EXPECT_GT(line.at(field).get<double>(), 0.0) << key << " " << field << ": " << line.dump();
    for (const char* field : {"prefill_peak_mib", "decode_b1_peak_mib", "decode_b3_peak_mib"})
      EXPECT_TRUE(line.at(field).is_number()) << key << " " << field << ": " << line.dump();
  }
  // A recurrent state does not grow with the context; a KV cache does, 8 times from 5 to 40 (but
  // for the 8 bytes of each row's position, which do not grow: 7.91 for this tiny model).
  for (const char* letter : {"R", "F", "G"})
    EXPECT_EQ(lines.at(std::string(letter) + "40").at("state_mib"), lines.at(std::string(letter) + "5").at("state_mib"))
        << letter;
  EXPECT_NEAR(lines.at("S40").at("state_mib").get<double>() / lines.at("S5").at("state_mib").get<double>(), 8.0, 0.1);
}

TEST(CliBenchDecode, RefusesBadFlags) {
  const std::string tiny = "bench decode --vocab 11 --d-model 16 --layers 1 --heads 2 --mlp-hidden 8 --repeats 1 ";
  const Outcome letter = run_linea(tiny + "--letters S,Q");
  EXPECT_EQ(letter.status, 1);
  EXPECT_NE(letter.output.find("unknown layer letter 'Q'"), std::string::npos) << letter.output;
  const Outcome joined = run_linea(tiny + "--letters SR");
  EXPECT_EQ(joined.status, 2);
  EXPECT_NE(joined.output.find("--letters takes single layer letters"), std::string::npos) << joined.output;
  EXPECT_EQ(run_linea(tiny + "--contexts 0").status, 2);
  EXPECT_EQ(run_linea(tiny + "--batches 2,x").status, 2);
  EXPECT_EQ(run_linea(tiny + "--decode-tokens 0").status, 2);
  EXPECT_EQ(run_linea(tiny + "--heads 3").status, 2);
}

}  // namespace
}  // namespace linea::cli
