// The chunked scan's cumulative log decays (cuda/kernels/log_decay_sum.cuh), run on the host as
// the kernels run them: a chunk's 64 log decays summed in segments of 16 (column_share's shares),
// the segments' sums combined, and the factors exp(L), exp(-L), exp(L_last - L) taken. Checked
// against sums in long double (a 64-bit mantissa) on fresh random chunks, log decays from near 0
// to the float32 floor. Runs without a GPU.
#include "cuda/kernels/log_decay_sum.cuh"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace linea::cuda::chunked {
namespace {

constexpr int kChunk = 64, kSegments = 4, kRows = kChunk / kSegments;
constexpr float kFloor = -110.0f;  // the float32 scan's floor of one step's log decay

template <class T>
struct ChunkSums {
  std::array<LogDecaySum<T>, kChunk> L;  // through each position
  LogDecaySum<T> total;
};

// As column_share sums one channel: each segment its own positions, then the segments before it.
template <class T>
ChunkSums<T> sum_chunk(const std::vector<float>& logs) {
  std::array<LogDecaySum<T>, kSegments> parts;
  ChunkSums<T> x;
  for (int q = 0; q < kSegments; ++q) {
    LogDecaySum<T> sum;
    for (int i = 0; i < kRows; ++i) {
      sum.add(static_cast<T>(logs[q * kRows + i]));
      x.L[q * kRows + i] = sum;
    }
    parts[q] = sum;
  }
  for (int q = 0; q < kSegments; ++q) {
    LogDecaySum<T> before, total;
    combine_segments(parts.data(), 1, kSegments, q, before, total);
    for (int i = 0; i < kRows; ++i) x.L[q * kRows + i] = x.L[q * kRows + i].plus(before);
    x.total = total;
  }
  return x;
}

long double value_of(const LogDecaySum<float>& x) {
  return static_cast<long double>(x.hi) + static_cast<long double>(x.lo);
}
long double value_of(const LogDecaySum<double>& x) { return x.value; }

// A chunk's log decays, each drawn from one of the kinds a gate gives: near 0 (an open gate),
// moderate, at or below the floor (a closed gate, floored as the kernels floor it).
std::vector<float> draw_chunk(std::mt19937_64& gen) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> logs(kChunk);
  const float mix = unit(gen);  // how closed this chunk's gates are
  for (float& x : logs) {
    const float kind = unit(gen);
    if (kind < 0.5f) x = -std::exp(-12.0f * unit(gen));  // -1 to -6e-6
    else if (kind < 0.5f + 0.5f * mix) x = -110.0f * unit(gen);
    else x = std::max(-120.0f * unit(gen) - 100.0f, kFloor);
  }
  return logs;
}

std::array<long double, kChunk> exact_sums(const std::vector<float>& logs) {
  std::array<long double, kChunk> L;
  long double sum = 0;
  for (int t = 0; t < kChunk; ++t) L[t] = sum += logs[t];
  return L;
}

constexpr int kChunks = 3000;

TEST(LogDecaySum, SumsAreExactToFarBelowFloatRounding) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 gen(seed);
  long double worst_pair = 0, worst_double = 0, worst_float = 0;  // relative to max(|L|, 1)
  for (int n = 0; n < kChunks; ++n) {
    const std::vector<float> logs = draw_chunk(gen);
    const auto exact = exact_sums(logs);
    const ChunkSums<float> pairs = sum_chunk<float>(logs);
    const ChunkSums<double> doubles = sum_chunk<double>(logs);
    float plain = 0;
    for (int t = 0; t < kChunk; ++t) {
      plain += logs[t];
      const long double scale = std::max(std::fabs(exact[t]), 1.0L);
      worst_pair = std::max(worst_pair, std::fabs(value_of(pairs.L[t]) - exact[t]) / scale);
      worst_double = std::max(worst_double, std::fabs(value_of(doubles.L[t]) - exact[t]) / scale);
      worst_float = std::max(worst_float, std::fabs(plain - exact[t]) / scale);
    }
  }
  // A sum in float32 alone is off by about 5e-7 (2^-21) of |L| at worst; the pair by about 2^-46,
  // the double by 2^-53.
  EXPECT_GT(worst_float, 1e-7L) << "the check would not see float rounding";
  EXPECT_LT(worst_pair, 0x1p-44L) << "float pairs";
  EXPECT_LT(worst_double, 0x1p-50L) << "doubles";
}

TEST(LogDecaySum, TotalIsTheLastSumToTheLastBit) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 gen(seed);
  for (int n = 0; n < kChunks; ++n) {
    const std::vector<float> logs = draw_chunk(gen);
    const ChunkSums<float> pairs = sum_chunk<float>(logs);
    ASSERT_EQ(pairs.total.hi, pairs.L[kChunk - 1].hi);
    ASSERT_EQ(pairs.total.lo, pairs.L[kChunk - 1].lo);
    const ChunkSums<double> doubles = sum_chunk<double>(logs);
    ASSERT_EQ(doubles.total.value, doubles.L[kChunk - 1].value);
    // exp(L_last - L_last) = 1 exactly: the chunk's last position carries nothing to the end.
    ASSERT_EQ(pairs.total.minus(pairs.L[kChunk - 1]).exp_up(), 1.0f);
  }
}

// The factors exp(L_t), exp(-L_t) (mild chunks: |L| <= 64) and exp(L_last - L_t), to float
// rounding: the float pair's, against exp of the exact sums; and exp of L rounded to float alone
// is off by more (what the pair's low part is for).
TEST(LogDecaySum, FactorsAreAccurateToFloatRounding) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 gen(seed);
  long double worst_up = 0, worst_down = 0, worst_to_end = 0, worst_rounded = 0;
  auto relative = [](long double x, long double y) { return std::fabs(x - y) / y; };
  for (int n = 0; n < kChunks; ++n) {
    const std::vector<float> logs = draw_chunk(gen);
    const auto exact = exact_sums(logs);
    const ChunkSums<float> pairs = sum_chunk<float>(logs);
    for (int t = 0; t < kChunk; ++t) {
      const long double to_end = exact[kChunk - 1] - exact[t];
      if (to_end > -80) {
        worst_to_end = std::max(worst_to_end, relative(pairs.total.minus(pairs.L[t]).exp_up(), std::exp(to_end)));
      }
      if (exact[t] < -64) continue;
      float up, down;
      pairs.L[t].exp_both(up, down);
      worst_up = std::max(worst_up, relative(up, std::exp(exact[t])));
      worst_down = std::max(worst_down, relative(down, std::exp(-exact[t])));
      worst_rounded = std::max(worst_rounded, relative(std::exp(static_cast<float>(exact[t])), std::exp(exact[t])));
    }
  }
  const long double ulp = 0x1p-23L;
  EXPECT_LT(worst_up, 2 * ulp);
  EXPECT_LT(worst_down, 2 * ulp);
  EXPECT_LT(worst_to_end, 2 * ulp);
  EXPECT_GT(worst_rounded, 8 * ulp) << "the check would not see the low part";
}

}  // namespace
}  // namespace linea::cuda::chunked
