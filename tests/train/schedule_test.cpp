// Learning-rate schedules at the steps where their pieces meet.
#include <cmath>
#include <numbers>

#include "tests/test_util.h"
#include "train/schedule.h"

namespace linea::train {
namespace {

LrSchedule make(Decay decay, int64_t warmup = 10, int64_t total = 110) {
  return LrSchedule({.peak_lr = 1.0, .min_lr = 0.1, .warmup_steps = warmup, .total_steps = total, .decay = decay});
}

TEST(LrSchedule, WarmupRisesLinearlyFromZero) {
  for (Decay decay : {Decay::Cosine, Decay::Linear, Decay::Constant}) {
    const LrSchedule s = make(decay);
    EXPECT_EQ(s(0), 0.0);
    EXPECT_DOUBLE_EQ(s(1), 0.1);
    EXPECT_DOUBLE_EQ(s(5), 0.5);
    EXPECT_DOUBLE_EQ(s(9), 0.9);
    EXPECT_DOUBLE_EQ(s(10), 1.0) << decay_name(decay);  // the peak, where the decay begins
  }
}

TEST(LrSchedule, CosineDecaysToMin) {
  const LrSchedule s = make(Decay::Cosine);
  EXPECT_DOUBLE_EQ(s(60), 0.55);  // halfway: the cosine's midpoint
  EXPECT_DOUBLE_EQ(s(35), 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.25)));
  EXPECT_NEAR(s(109), 0.1, 1e-3);
  EXPECT_DOUBLE_EQ(s(110), 0.1);
  EXPECT_DOUBLE_EQ(s(1000), 0.1);
}

TEST(LrSchedule, LinearDecaysToMin) {
  const LrSchedule s = make(Decay::Linear);
  EXPECT_DOUBLE_EQ(s(35), 0.1 + 0.9 * 0.75);
  EXPECT_DOUBLE_EQ(s(60), 0.55);
  EXPECT_DOUBLE_EQ(s(110), 0.1);
  EXPECT_DOUBLE_EQ(s(5000), 0.1);
}

TEST(LrSchedule, ConstantStaysAtPeak) {
  const LrSchedule s = make(Decay::Constant);
  EXPECT_DOUBLE_EQ(s(60), 1.0);
  EXPECT_DOUBLE_EQ(s(500), 1.0);
}

TEST(LrSchedule, WithoutWarmupStartsAtPeak) {
  EXPECT_DOUBLE_EQ(make(Decay::Cosine, 0, 100)(0), 1.0);
  EXPECT_DOUBLE_EQ(make(Decay::Linear, 0, 100)(50), 0.55);
  EXPECT_DOUBLE_EQ(make(Decay::Cosine, 0, 0)(0), 0.1);  // nothing to decay over
}

TEST(LrSchedule, RejectsBadOptions) {
  EXPECT_LINEA_ERROR(LrSchedule({.peak_lr = 1.0, .min_lr = 2.0, .total_steps = 10}), "min_lr");
  EXPECT_LINEA_ERROR(LrSchedule({.warmup_steps = 20, .total_steps = 10}), "warmup_steps");
  EXPECT_LINEA_ERROR(make(Decay::Cosine)(-1), "negative step");
  EXPECT_EQ(parse_decay("linear"), Decay::Linear);
  EXPECT_LINEA_ERROR(parse_decay("exp"), "'exp'", "cosine, linear or constant");
}

}  // namespace
}  // namespace linea::train
