// Batchers: random training windows that a seed fixes and a saved state resumes exactly, and
// evaluation windows that predict every token of a split once.
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "tests/test_util.h"
#include "train/batcher.h"

namespace linea::train {
namespace {

std::vector<int64_t> iota_tokens(int64_t n) {
  std::vector<int64_t> tokens(static_cast<size_t>(n));
  std::iota(tokens.begin(), tokens.end(), 1000);
  return tokens;
}

std::vector<int64_t> values(const Tensor& t) { return t.to_vector<int64_t>(); }

void expect_same_batch(const Batch& a, const Batch& b) {
  EXPECT_EQ(values(a.inputs), values(b.inputs));
  EXPECT_EQ(values(a.targets), values(b.targets));
}

TEST(RandomBatcher, TargetsAreInputsShiftedByOne) {
  const std::vector<int64_t> tokens = iota_tokens(500);
  RandomBatcher batcher(tokens, 8, 16, 1);
  for (int step = 0; step < 20; ++step) {
    const Batch batch = batcher.next();
    ASSERT_EQ(batch.inputs.shape(), (Shape{8, 16}));
    ASSERT_EQ(batch.targets.shape(), (Shape{8, 16}));
    EXPECT_EQ(batch.inputs.dtype(), kInt64);
    const std::vector<int64_t> in = values(batch.inputs), out = values(batch.targets);
    for (int64_t b = 0; b < 8; ++b) {
      const int64_t start = in[b * 16] - 1000;
      ASSERT_GE(start, 0);
      ASSERT_LE(start + 16, 499) << "the last target must exist";
      for (int64_t t = 0; t < 16; ++t) {
        EXPECT_EQ(in[b * 16 + t], tokens[start + t]);
        EXPECT_EQ(out[b * 16 + t], tokens[start + t + 1]);
      }
    }
  }
}

TEST(RandomBatcher, ReachesEveryStartIncludingTheLast) {
  // 12 tokens and a context of 4: a window needs 5 tokens, so it starts at 0..7.
  const std::vector<int64_t> tokens = iota_tokens(12);
  RandomBatcher batcher(tokens, 64, 4, 2);
  std::set<int64_t> starts;
  for (int step = 0; step < 10; ++step) {
    const std::vector<int64_t> in = values(batcher.next().inputs);
    for (size_t row = 0; row < 64; ++row) starts.insert(in[row * 4] - 1000);
  }
  EXPECT_EQ(starts, (std::set<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  RandomBatcher exact(tokens, 1, 11, 3);
  EXPECT_EQ(values(exact.next().targets).back(), tokens.back()) << "a context of n - 1 has one window";
}

TEST(RandomBatcher, TheSeedFixesTheBatches) {
  const std::vector<int64_t> tokens = iota_tokens(10000);
  RandomBatcher a(tokens, 4, 32, 42), b(tokens, 4, 32, 42), c(tokens, 4, 32, 43);
  bool differs = false;
  for (int step = 0; step < 10; ++step) {
    const Batch from_a = a.next(), from_c = c.next();
    expect_same_batch(from_a, b.next());
    differs |= values(from_a.inputs) != values(from_c.inputs);
  }
  EXPECT_TRUE(differs) << "another seed should draw other windows";
}

TEST(RandomBatcher, ARestoredStateDrawsWhatTheOriginalWouldHave) {
  const std::vector<int64_t> tokens = iota_tokens(10000);
  RandomBatcher original(tokens, 4, 32, 7);
  for (int step = 0; step < 5; ++step) original.next();
  const BatcherState saved = original.state();
  EXPECT_EQ(saved.seed, 7u);
  EXPECT_EQ(saved.batches_drawn, 5);
  std::vector<Batch> expected;
  for (int step = 0; step < 5; ++step) expected.push_back(original.next());

  RandomBatcher resumed(tokens, 4, 32, /*seed=*/999);  // the seed comes back with the state
  resumed.restore(saved);
  for (const Batch& batch : expected) expect_same_batch(resumed.next(), batch);
  EXPECT_EQ(resumed.state().offset, original.state().offset);

  RandomBatcher reshaped(tokens, 8, 32, 7);
  EXPECT_LINEA_ERROR(reshaped.restore(saved), "batch size 4", "must keep both");
}

TEST(RandomBatcher, TheStateSurvivesJson) {
  const BatcherState state{UINT64_MAX, (uint64_t{1} << 63) + 5, 12, 4, 32};
  const json::Value value = json::parse(to_json(state).dump());
  const BatcherState back = batcher_state_from_json(value, "trainer.json data");
  EXPECT_EQ(back.seed, state.seed);
  EXPECT_EQ(back.offset, state.offset);
  EXPECT_EQ(back.batches_drawn, 12);
  EXPECT_EQ(back.batch_size, 4);
  EXPECT_EQ(back.context, 32);
  json::Value bad = value;
  bad["offset"] = "12x";
  EXPECT_LINEA_ERROR(batcher_state_from_json(bad, "trainer.json data"), "trainer.json data", "offset", "12x");
  bad["offset"] = 12;
  EXPECT_LINEA_ERROR(batcher_state_from_json(bad, "trainer.json data"), "offset");
}

TEST(RandomBatcher, RejectsSplitsTooShortForTheContext) {
  const std::vector<int64_t> tokens = iota_tokens(10);
  EXPECT_LINEA_ERROR(RandomBatcher(tokens, 2, 10, 0), "context of 10", "has 10");
  EXPECT_LINEA_ERROR(RandomBatcher(tokens, 0, 4, 0), "must be positive");
  EXPECT_LINEA_ERROR(RandomBatcher(std::vector<int64_t>{1}, 1, 1, 0), "nothing to predict");
}

TEST(EvalBatches, PredictEveryTokenExactlyOnce) {
  for (const int64_t n : {2, 17, 33, 64, 65, 100}) {
    for (const int64_t batch_size : {1, 3}) {
      for (const int64_t context : {1, 4, 16, 200}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " B=" << batch_size << " T=" << context);
        const std::vector<int64_t> tokens = iota_tokens(n);
        const EvalBatches batches(tokens, batch_size, context);
        std::vector<int64_t> inputs, targets;
        for (int64_t i = 0; i < batches.size(); ++i) {
          const Batch batch = batches[i];
          ASSERT_EQ(batch.inputs.shape(), batch.targets.shape());
          ASSERT_LE(batch.inputs.size(0), batch_size);
          if (i + 1 < batches.size()) {
            ASSERT_EQ(batch.inputs.size(1), context) << "only the final batch may be short";
          }
          for (const int64_t v : values(batch.inputs)) inputs.push_back(v);
          for (const int64_t v : values(batch.targets)) targets.push_back(v);
        }
        EXPECT_EQ(inputs, std::vector<int64_t>(tokens.begin(), tokens.end() - 1));
        EXPECT_EQ(targets, std::vector<int64_t>(tokens.begin() + 1, tokens.end()));
        EXPECT_EQ(batches.num_targets(), n - 1);
      }
    }
  }
}

TEST(EvalBatches, TheRemainderIsOneShortRow) {
  const std::vector<int64_t> tokens = iota_tokens(23);  // 22 targets: 2 windows of 8, then 6
  const EvalBatches batches(tokens, 4, 8);
  ASSERT_EQ(batches.size(), 2);
  EXPECT_EQ(batches[0].inputs.shape(), (Shape{2, 8}));
  EXPECT_EQ(batches[1].inputs.shape(), (Shape{1, 6}));
  EXPECT_EQ(values(batches[1].targets).back(), 1022);
  EXPECT_LINEA_ERROR(batches[2], "batch 2 of 2");
}

}  // namespace
}  // namespace linea::train
