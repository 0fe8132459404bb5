// Data-parallel training's logic on the CPU, with the ranks as threads (thread_communicator.h):
// the buckets, each rank's rows, gradients averaged across ranks, and the trainer end to end
// (N ranks of batch B train like one process of batch N B; one rank is bitwise one process; a
// checkpoint resumes on another number of ranks; a stop on one rank stops all after one step).
// NCCL itself runs on the GPU machines (tests/cuda/nccl_test.cpp).
#include <cmath>
#include <sstream>

#include "tests/test_util.h"
#include "tests/train/run_logs.h"
#include "tests/train/temp_dir.h"
#include "tests/train/thread_communicator.h"
#include "train/data_parallel.h"
#include "train/evaluate.h"
#include "train/file_io.h"
#include "train/gradient_sync.h"
#include "train/trainer.h"

namespace linea::train {
namespace {

using linea::testing::generated_text;
using linea::testing::logged_losses;
using linea::testing::quiet;
using linea::testing::tiny_train_options;
using linea::testing::run_ranks;
using linea::testing::TempDir;

TEST(PlanBuckets, ReverseOrderWithinTheCap) {
  // Sizes in bytes of parameters 0..5; backward finishes the last ones first.
  const std::vector<std::vector<size_t>> b = plan_buckets({40, 10, 30, 100, 20, 20}, 50);
  const std::vector<std::vector<size_t>> expected = {{5, 4}, {3}, {2, 1}, {0}};
  EXPECT_EQ(b, expected);
  EXPECT_EQ(plan_buckets({8, 8, 8}, 1 << 20), (std::vector<std::vector<size_t>>{{2, 1, 0}}));
  EXPECT_TRUE(plan_buckets({}, 16).empty());
  EXPECT_THROW(plan_buckets({4}, 0), Error);
}

TEST(RowsOfRank, BlocksOfTheGlobalBatch) {
  Generator gen(3);
  const Batch global{randint(0, 100, {6, 5}, kCPU, &gen), randint(0, 100, {6, 5}, kCPU, &gen)};
  for (int world : {1, 2, 3, 6}) {
    std::vector<int64_t> inputs, targets;
    for (int r = 0; r < world; ++r) {
      const Batch mine = rows_of_rank(global, r, world);
      EXPECT_EQ(mine.inputs.shape(), (Shape{6 / world, 5}));
      for (int64_t v : mine.inputs.to_vector<int64_t>()) inputs.push_back(v);
      for (int64_t v : mine.targets.to_vector<int64_t>()) targets.push_back(v);
    }
    EXPECT_EQ(inputs, global.inputs.to_vector<int64_t>()) << world;
    EXPECT_EQ(targets, global.targets.to_vector<int64_t>()) << world;
  }
  EXPECT_THROW(rows_of_rank(global, 0, 4), Error);
  EXPECT_THROW(rows_of_rank(global, 2, 2), Error);
  EXPECT_EQ(per_rank_batch(32, 4), 8);
  EXPECT_THROW(per_rank_batch(32, 3), Error);
}

// Every rank ends with the mean of the ranks' gradients, whatever order its hooks fire in, and a
// parameter without a gradient keeps none.
TEST(GradientSync, LeavesTheMeanOfTheRanksGradients) {
  constexpr int kRanks = 3;
  const std::vector<Shape> shapes = {{7, 3}, {5}, {2, 2, 2}, {11}, {1}};
  // rank r's gradient of parameter i: random, fixed by (r, i).
  const auto grad_of = [&](int r, size_t i) { Generator g(100 * r + i); return randn(shapes[i], {kFloat32}, &g); };
  std::vector<std::vector<float>> mean(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::vector<float> total = grad_of(0, i).to_vector<float>();
    for (int r = 1; r < kRanks; ++r) {
      const std::vector<float> g = grad_of(r, i).to_vector<float>();
      for (size_t k = 0; k < g.size(); ++k) total[k] += g[k];
    }
    for (float& v : total) v = v * (1.0f / kRanks);
    mean[i] = total;
  }
  std::vector<std::vector<std::vector<float>>> got(kRanks);
  run_ranks(kRanks, [&](int rank, dist::Communicator& comm) {
    std::vector<Tensor> params;
    for (const Shape& s : shapes) params.push_back(zeros(s, {kFloat32}).requires_grad_());
    GradientSync sync(comm, params, /*bucket_bytes=*/48);  // several buckets
    EXPECT_GT(sync.num_buckets(), 2);
    for (int step = 0; step < 2; ++step) {  // twice: the second step reuses the buckets
      for (Tensor& p : params) p.set_grad(Tensor());
      // The hook fires in an order of the rank's own; parameter 3 gets no gradient.
      const GradAccumulatedHook hook = sync.hook();
      for (size_t i : {4u, 0u, 2u, 1u})
        if (i != 3) {
          params[i].set_grad(grad_of(rank, i));
          hook(params[i]);
        }
      sync.finish();
    }
    for (size_t i = 0; i < params.size(); ++i)
      got[rank].push_back(params[i].grad().defined() ? params[i].grad().to_vector<float>() : std::vector<float>{});
  });
  for (int r = 0; r < kRanks; ++r)
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (i == 3) {
        EXPECT_TRUE(got[r][i].empty());
        continue;
      }
      ASSERT_EQ(got[r][i].size(), mean[i].size());
      for (size_t k = 0; k < mean[i].size(); ++k) EXPECT_NEAR(got[r][i][k], mean[i][k], 1e-6) << r << " " << i;
    }
}

// The step's losses and stop requests travel at the end of the last bucket: the ranks agree on the
// mean of each loss and on "any rank asked to stop" with no collective beyond the buckets' own, and
// the gradients still come out as the means.
TEST(GradientSync, SharedNumbersRideTheLastBucket) {
  constexpr int kRanks = 3;
  const std::vector<Shape> shapes = {{4, 3}, {6}, {2, 5}};
  std::vector<Agreement> agreed(kRanks);
  std::vector<int64_t> collectives(kRanks), buckets(kRanks);
  std::vector<std::vector<float>> first_grad(kRanks);
  run_ranks(kRanks, [&](int rank, dist::Communicator& comm) {
    std::vector<Tensor> params;
    for (const Shape& s : shapes) params.push_back(zeros(s, {kFloat32}).requires_grad_());
    GradientSync sync(comm, params, /*bucket_bytes=*/40);
    buckets[rank] = sync.num_buckets();
    const int64_t before = dynamic_cast<testing::ThreadCommunicator&>(comm).reductions;
    // Two micro-batches' losses; rank 1 asks to stop.
    sync.share({scalar_tensor(1.5 + rank, {kFloat32}), scalar_tensor(-2.0 * rank, {kFloat32})}, rank == 1);
    const GradAccumulatedHook hook = sync.hook();
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].set_grad(full(shapes[i], static_cast<double>(rank + i), {kFloat32}));
      hook(params[i]);
    }
    EXPECT_LINEA_ERROR(sync.share({}, false), "share", "last bucket");
    sync.finish();
    agreed[rank] = sync.agreement();
    collectives[rank] = dynamic_cast<testing::ThreadCommunicator&>(comm).reductions - before;
    first_grad[rank] = params[0].grad().to_vector<float>();
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_GT(buckets[r], 1);
    EXPECT_EQ(collectives[r], buckets[r]) << "one collective per bucket, none for the shared numbers";
    ASSERT_EQ(agreed[r].losses.size(), 2u);
    EXPECT_NEAR(agreed[r].losses[0], (1.5 + 2.5 + 3.5) / 3, 1e-6);
    EXPECT_NEAR(agreed[r].losses[1], (0.0 - 2.0 - 4.0) / 3, 1e-6);
    EXPECT_TRUE(agreed[r].stop);
    EXPECT_EQ(first_grad[r], std::vector<float>(12, 1.0f)) << "the mean of 0, 1 and 2";
  }
}

// A rank whose loss is not finite makes the agreed loss not finite on every rank; nobody asked to
// stop, so nobody stops; a loss that is not one number is refused.
TEST(GradientSync, ANonFiniteLossOnOneRankReachesAll) {
  std::vector<Agreement> agreed(2);
  run_ranks(2, [&](int rank, dist::Communicator& comm) {
    Tensor p = zeros({3}, {kFloat32}).requires_grad_();
    GradientSync sync(comm, {p});
    EXPECT_LINEA_ERROR(sync.share({zeros({2}, {kFloat32})}, false), "share", "one number");
    sync.share({scalar_tensor(rank == 0 ? std::nan("") : 2.0, {kFloat32})}, false);
    sync.finish();  // p got no gradient: zeros in the bucket, and it keeps none
    agreed[rank] = sync.agreement();
    EXPECT_FALSE(p.grad().defined());
  });
  for (const Agreement& a : agreed) {
    EXPECT_TRUE(std::isnan(a.losses.at(0)));
    EXPECT_FALSE(a.stop);
  }
}

// The tiny run (run_logs.h) over 50 steps of `batch` sequences, evaluated at 25 and 50.
TrainOptions options_for(const TempDir& dir, const std::string& run, int64_t batch) {
  TrainOptions o = tiny_train_options(dir, run);
  o.steps = 50;
  o.batch = batch;
  o.warmup = 5;
  o.eval_every = 25;
  o.eval_batches = 3;
  o.save_every = 20;
  return o;
}


// N ranks of B sequences see the rows one process of N B sees, and average the same gradients:
// the runs differ only in the order float32 sums are taken (the loss's mean over rows, the
// gradients' sum over ranks). Over 50 steps those rounding differences stay within one float32
// unit in the last place of the logged loss (measured: 1.2e-7 at a loss near 3, for 2 and 4 ranks);
// 1e-5 relative leaves room for another platform's BLAS, while a wrong shard, a missing average or
// an unsynchronised update moves the loss by 1e-2 or more within a few steps.
TEST(DataParallelTrainer, RanksOfBTrainLikeOneProcessOfNB) {
  TempDir dir;
  write_file_atomically(dir / "corpus.txt", generated_text(11));
  std::FILE* null = quiet();
  const TrainResult alone = train_model(options_for(dir, "alone", 8), null);
  for (int world : {2, 4}) {
    const std::string run = "ranks" + std::to_string(world);
    std::vector<TrainResult> results(world);
    run_ranks(world, [&](int rank, dist::Communicator& comm) {
      results[rank] = train_model(options_for(dir, run, 8 / world), null, {}, {}, &comm);
    });
    const auto expected = logged_losses(dir / "alone"), got = logged_losses(dir / run);
    ASSERT_EQ(got.size(), 50u);
    for (const auto& [step, loss] : expected) EXPECT_NEAR(got.at(step), loss, 1e-5 * std::abs(loss)) << step;
    const auto expected_eval = logged_losses(dir / "alone", "eval"), got_eval = logged_losses(dir / run, "eval");
    for (const auto& [step, loss] : expected_eval) EXPECT_NEAR(got_eval.at(step), loss, 1e-5 * loss) << step;
    for (int r = 0; r < world; ++r) {
      EXPECT_NEAR(results[r].test_loss, alone.test_loss, 1e-5 * alone.test_loss);
      EXPECT_EQ(results[r].steps, 50);
    }
    EXPECT_FALSE(results[0].checkpoint.empty());
    EXPECT_FALSE(results[0].sample.empty());
    EXPECT_TRUE(results[1].checkpoint.empty()) << "only rank 0 writes";
    EXPECT_TRUE(results[1].sample.empty());
  }
  std::fclose(null);
}

// A run of `steps` steps in one process with batch `alone_batch` ("alone") and the same run on
// `ranks` ranks of `ranked_batch` ("ranked"), over a corpus drawn from `seed`, with `accum`
// micro-batches a step: their results (rank 0's for the ranked run), the logs in `dir`.
std::pair<TrainResult, TrainResult> alone_and_ranked(const TempDir& dir, uint64_t seed, int ranks, int64_t alone_batch,
                                                     int64_t ranked_batch, int64_t steps, int64_t accum = 1) {
  write_file_atomically(dir / "corpus.txt", generated_text(seed));
  std::FILE* null = quiet();
  TrainOptions alone = options_for(dir, "alone", alone_batch), ranked = options_for(dir, "ranked", ranked_batch);
  alone.steps = ranked.steps = steps;
  alone.accum = ranked.accum = accum;
  const TrainResult a = train_model(alone, null);
  TrainResult b;
  run_ranks(ranks, [&](int rank, dist::Communicator& comm) {
    const TrainResult r = train_model(ranked, null, {}, {}, &comm);
    if (rank == 0) b = r;
  });
  std::fclose(null);
  return {a, b};
}

// With gradient accumulation every micro-batch's loss travels in the last bucket: 2 ranks of 2
// rows, 2 micro-batches a step, log the losses one process of 4 rows logs, within float32 rounding.
TEST(DataParallelTrainer, AccumulatedMicroBatchesTrainLikeOneProcess) {
  TempDir dir;
  alone_and_ranked(dir, 14, 2, 4, 2, 20, /*accum=*/2);
  const auto expected = logged_losses(dir / "alone"), got = logged_losses(dir / "ranked");
  ASSERT_EQ(got.size(), 20u);
  for (const auto& [step, loss] : expected) EXPECT_NEAR(got.at(step), loss, 1e-5 * std::abs(loss)) << step;
}

// The data-parallel path adds nothing of its own: one rank is bitwise one plain process.
TEST(DataParallelTrainer, OneRankIsBitwiseAPlainRun) {
  TempDir dir;
  const auto [a, b] = alone_and_ranked(dir, 12, 1, 4, 4, 12);
  EXPECT_EQ(logged_losses(dir / "alone"), logged_losses(dir / "ranked"));
  EXPECT_EQ(a.test_loss, b.test_loss);
  EXPECT_EQ(a.sample, b.sample);
}

// A checkpoint of 2 ranks of 4 resumes in one process of 8 (the global batch kept), and goes on
// as the 2-rank run would have.
TEST(DataParallelTrainer, ResumesOnAnotherNumberOfRanks) {
  TempDir dir;
  write_file_atomically(dir / "corpus.txt", generated_text(13));
  std::FILE* null = quiet();
  const auto two_ranks = [&](TrainOptions o) {
    run_ranks(2, [&](int, dist::Communicator& comm) { train_model(o, null, {}, {}, &comm); });
  };
  TrainOptions full = options_for(dir, "full", 4);
  full.steps = 24;
  full.schedule = "constant";  // the learning rate must not depend on where the first part ends
  two_ranks(full);
  TrainOptions first = full;
  first.out = dir / "split";
  first.steps = 12;
  two_ranks(first);
  TrainOptions resumed = first;
  resumed.steps = 24;
  resumed.resume = true;  // the options still say 4 sequences: the checkpoint's 8 win
  const TrainResult r = train_model(resumed, null);
  EXPECT_EQ(r.steps, 24);
  const auto expected = logged_losses(full.out), got = logged_losses(first.out);
  ASSERT_EQ(got.size(), 24u);
  for (int64_t step = 1; step <= 12; ++step) EXPECT_EQ(got.at(step), expected.at(step)) << step;
  for (int64_t step = 13; step <= 24; ++step)
    EXPECT_NEAR(got.at(step), expected.at(step), 1e-5 * expected.at(step)) << step;
  // Three ranks cannot split a global batch of 8.
  TrainOptions odd = resumed;
  odd.steps = 30;
  EXPECT_THROW(run_ranks(3, [&](int, dist::Communicator& comm) { train_model(odd, null, {}, {}, &comm); }), Error);
  std::fclose(null);
}

// A stop requested on one rank stops every rank after the same step, with rank 0's checkpoint.
TEST(DataParallelTrainer, AStopOnOneRankStopsAllAfterTheSameStep) {
  TempDir dir;
  write_file_atomically(dir / "corpus.txt", generated_text(14));
  std::FILE* null = quiet();
  TrainOptions o = options_for(dir, "run", 2);
  std::vector<TrainResult> results(2);
  run_ranks(2, [&](int rank, dist::Communicator& comm) {
    int asked = 0;
    const StopRequested stop = [&] { return rank == 1 && ++asked > 7; };  // before step 8
    results[rank] = train_model(o, null, stop, {}, &comm);
  });
  for (const TrainResult& r : results) {
    EXPECT_TRUE(r.stopped);
    EXPECT_EQ(r.steps, 8);
  }
  EXPECT_FALSE(results[0].checkpoint.empty());
  EXPECT_EQ(logged_losses(o.out).size(), 8u);
  std::fclose(null);
}

// Shared evaluation: each rank takes every N-th batch, and all return the split's loss.
TEST(DataParallelEvaluate, RanksShareTheBatchesAndAgree) {
  Generator gen(21);
  nn::ModelConfig config;
  config.vocab_size = 30;
  config.d_model = 16;
  config.heads = 2;
  config.pattern = "RS";
  nn::LanguageModel model(config, gen);
  const std::vector<int64_t> tokens = randint(0, 30, {413}, kCPU, &gen).to_vector<int64_t>();
  const EvalResult alone = evaluate(model, tokens, 3, 16, kCPU);
  for (int world : {2, 3, 5}) {
    std::vector<EvalResult> results(world);
    run_ranks(world, [&](int rank, dist::Communicator& comm) {
      Generator same(21);
      nn::LanguageModel replica(config, same);
      results[rank] = evaluate(replica, tokens, 3, 16, kCPU, 0, {}, &comm);
    });
    for (const EvalResult& r : results) {
      EXPECT_EQ(r.tokens, alone.tokens);
      EXPECT_NEAR(r.loss, alone.loss, 1e-12 * alone.loss) << world;
    }
  }
}

}  // namespace
}  // namespace linea::train
