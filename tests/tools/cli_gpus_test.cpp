// `linea train --gpus N` as a user runs it. Without a GPU (CI) the flags' errors and a rank that
// cannot find its GPU are checked; with one GPU, a world of one rank goes through the launcher,
// the rendezvous and NCCL and must give a plain run's losses bit for bit; with two, 2 GPUs x B
// must train like 1 GPU x 2B, over NVLink and over the socket transport as two "hosts", and a
// killed rank must be named while the last checkpoint stays loadable.
#include <chrono>
#include <sstream>
#include <string>

#include "cuda/memory.h"
#include "dist/nccl_communicator.h"
#include "nn/json.h"
#include "tests/dist/free_port.h"
#include "tests/test_util.h"
#include "tests/tools/run_linea.h"
#include "tests/train/run_logs.h"
#include "tests/train/temp_dir.h"
#include "train/checkpoint.h"
#include "train/file_io.h"

namespace linea::cli {
namespace {

using linea::testing::logged_losses;
using linea::testing::TempDir;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string corpus(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 400; ++i)
    text += "ranks " + std::to_string(i % 13) + " share batches and sum gradients " + std::to_string(i % 5) + ".\n";
  train::write_file_atomically(dir / "corpus.txt", text);
  return "--data " + dir / "corpus.txt" + " --cache-dir none --model RS --d-model 32 --heads 2 --seq 32 "
         "--warmup 5 --eval-every 0 --sample-tokens 0 --seed 3 ";
}

std::string master() { return "--master 127.0.0.1:" + std::to_string(linea::testing::free_port()) + " "; }

TEST(CliGpus, BadFlagsAreRefusedByName) {
  TempDir dir;
  for (const auto& [flags, named] : std::vector<std::pair<std::string, std::string>>{
           {"--gpus 0", "--gpus"}, {"--gpus 1 --nnodes 0", "--nnodes"}, {"--gpus 1 --nnodes 2 --node-rank 2", "--node-rank"},
           {"--gpus 1 --master nohost", "--master"}, {"--gpus 1 --master host:99999", "--master"},
           {"--gpus 1 --dist-timeout 0", "--dist-timeout"}}) {
    const Outcome o = run_linea("train " + flags + " --out " + dir / "bad");
    EXPECT_NE(o.status, 0) << flags;
    EXPECT_TRUE(contains(o.output, named)) << flags << ": " << o.output;
  }
}

TEST(CliGpus, ARankWithoutItsGpuIsNamed) {
  if (linea::testing::cuda_available()) GTEST_SKIP() << "this machine has a GPU: checked where none is";
  TempDir dir;
  const Outcome o = run_linea("train " + corpus(dir) + "--steps 2 --batch 2 --gpus 1 " + master() + "--out " +
                              dir / "run");
  EXPECT_NE(o.status, 0);
  if (dist::nccl_available()) {
    EXPECT_TRUE(contains(o.output, "rank 0")) << o.output;
    EXPECT_TRUE(contains(o.output, "cuda") || contains(o.output, "CUDA")) << o.output;
  } else {
    EXPECT_TRUE(contains(o.output, "need NCCL") && contains(o.output, "has none")) << o.output;
  }
}

#define LINEA_SKIP_WITHOUT_GPUS(n)                                                                           \
  do {                                                                                                       \
    LINEA_SKIP_WITHOUT_CUDA();                                                                               \
    if (!dist::nccl_available()) GTEST_SKIP() << "built without NCCL: skipped";                              \
    if (cuda::device_count() < (n)) GTEST_SKIP() << "needs " << (n) << " GPUs, this machine has " << cuda::device_count(); \
  } while (0)

// NCCL's sum over one rank is the rank's own gradient: the whole launcher-rendezvous-NCCL path
// must change nothing.
TEST(CliGpus, OneGpuThroughNcclIsBitwiseAPlainRun) {
  LINEA_SKIP_WITHOUT_GPUS(1);
  TempDir dir;
  const std::string common = corpus(dir) + "--steps 20 --batch 8 ";
  const Outcome plain = run_linea("train " + common + "--device cuda --out " + dir / "plain");
  ASSERT_EQ(plain.status, 0) << plain.output;
  const Outcome ranked = run_linea("train " + common + "--gpus 1 " + master() + "--out " + dir / "ranked");
  ASSERT_EQ(ranked.status, 0) << ranked.output;
  EXPECT_EQ(logged_losses(dir / "plain"), logged_losses(dir / "ranked"));
}

// 2 GPUs x B against 1 GPU x 2B over 50 steps: the same rows, the same mean gradient; only the
// order of float32 (and TF32) sums differs, which 1e-3 relative bounds with room.
void expect_like_one_gpu(const TempDir& dir, const std::string& run, double tolerance) {
  const auto one = logged_losses(dir / "one"), two = logged_losses(dir / run);
  ASSERT_EQ(two.size(), 50u);
  for (const auto& [step, loss] : one) EXPECT_NEAR(two.at(step), loss, tolerance * loss) << run << " step " << step;
}

TEST(CliGpus, TwoGpusOfBTrainLikeOneOfTwoB) {
  LINEA_SKIP_WITHOUT_GPUS(2);
  TempDir dir;
  const std::string common = corpus(dir) + "--steps 50 ";
  const Outcome one = run_linea("train " + common + "--batch 16 --device cuda --out " + dir / "one");
  ASSERT_EQ(one.status, 0) << one.output;
  const Outcome two = run_linea("train " + common + "--batch 8 --gpus 2 " + master() + "--out " + dir / "two");
  ASSERT_EQ(two.status, 0) << two.output;
  expect_like_one_gpu(dir, "two", 1e-3);

  // Two "hosts" of one GPU each, NCCL forced onto its network (socket) transport.
  const std::string m = master();
  const std::string net = "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo ";
  const std::string host = "train " + common + "--batch 8 --gpus 1 --nnodes 2 " + m + "--out " + dir / "hosts";
  const Outcome hosts = run_linea("--help >/dev/null 2>&1; (" + net + "CUDA_VISIBLE_DEVICES=1 " + LINEA_CLI_PATH + " " +
                                  host + " --node-rank 1 >/dev/null 2>&1 &) ; " + net + "CUDA_VISIBLE_DEVICES=0 " +
                                  LINEA_CLI_PATH + " " + host + " --node-rank 0");
  ASSERT_EQ(hosts.status, 0) << hosts.output;
  expect_like_one_gpu(dir, "hosts", 1e-3);
}

// A rank killed mid-run: the launcher names it, the others stop within the monitor's bounds
// instead of hanging, and the latest checkpoint stays loadable.
TEST(CliGpus, AKilledRankIsNamedAndTheCheckpointKept) {
  LINEA_SKIP_WITHOUT_GPUS(2);
  TempDir dir;
  const std::string log = dir / "run/log.jsonl";
  const std::string script =
      "--help >/dev/null 2>&1; ( " + std::string(LINEA_CLI_PATH) + " train " + corpus(dir) +
      "--steps 100000 --batch 8 --save-every 5 --gpus 2 " + master() + "--out " + dir / "run" + " & L=$!; " +
      "for i in $(seq 600); do [ -f " + log + " ] && [ $(grep -c -E '\"kind\": ?\"step\"' " + log +
      ") -ge 12 ] && break; sleep 0.1; done; kill -9 $(pgrep -P $L | sort -n | sed -n 2p); wait $L; echo status=$? )";
  const auto start = std::chrono::steady_clock::now();
  const Outcome o = run_linea(script);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(contains(o.output, "rank 1")) << o.output;
  EXPECT_TRUE(contains(o.output, "killed by signal 9")) << o.output;
  EXPECT_FALSE(contains(o.output, "status=0")) << o.output;
  EXPECT_TRUE(contains(o.output, "rank 0 stops: rank 1")) << "the survivor names the lost rank: " << o.output;
  EXPECT_FALSE(contains(o.output, "did not stop within")) << "the survivor must stop by itself: " << o.output;
  EXPECT_LT(seconds, 60) << "the surviving rank must stop, not hang";
  const std::optional<std::string> latest = train::latest_checkpoint(dir / "run");
  ASSERT_TRUE(latest.has_value());
  EXPECT_NO_THROW(train::load_checkpoint(*latest));
}

}  // namespace
}  // namespace linea::cli
