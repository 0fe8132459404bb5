// --precision as a user passes it: a bf16 training run, its checkpoint evaluated and sampled in
// bf16 and in fp32 (the weights are float32 either way, so either reads any checkpoint), the run's
// config remembering it, and an unknown precision refused by name.
#include <string>

#include "nn/json.h"
#include "tests/test_util.h"
#include "tests/tools/run_linea.h"
#include "tests/train/temp_dir.h"
#include "train/file_io.h"

namespace linea::cli {
namespace {

using linea::testing::TempDir;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CliPrecision, Bf16TrainsEvaluatesAndGenerates) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "a small corpus of words " + std::to_string(i % 7) + " in bfloat16.\n";
  train::write_file_atomically(dir / "corpus.txt", text);
  const Outcome trained = run_linea("train --data " + dir / "corpus.txt" + " --cache-dir none --model RS --d-model 16 "
                                    "--heads 2 --steps 3 --batch 2 --seq 16 --warmup 0 --eval-every 0 "
                                    "--sample-tokens 4 --precision bf16 --out " + dir / "run");
  ASSERT_EQ(trained.status, 0) << trained.output;
  const std::string options = train::read_file(dir / "run/step-00000003/trainer.json", "trainer state");
  EXPECT_TRUE(contains(options, R"("precision": "bf16")")) << options;
  for (const char* precision : {"bf16", "fp32"}) {
    const Outcome eval = run_linea("eval --checkpoint " + dir / "run" + " --precision " + precision);
    EXPECT_EQ(eval.status, 0) << eval.output;
    EXPECT_TRUE(contains(eval.output, "ppl")) << eval.output;
    const Outcome generated =
        run_linea("generate --checkpoint " + dir / "run" + " --tokens 5 --prompt 'a small' --precision " + precision);
    EXPECT_EQ(generated.status, 0) << generated.output;
  }
  const Outcome bad = run_linea("train --precision fp16 --out " + dir / "bad");
  EXPECT_NE(bad.status, 0);
  EXPECT_TRUE(contains(bad.output, "fp16") && contains(bad.output, "bf16")) << bad.output;
}

}  // namespace
}  // namespace linea::cli
