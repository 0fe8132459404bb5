// Global gradient norm, clipping and the finiteness check.
#include <cmath>
#include <limits>

#include "tests/test_util.h"
#include "train/grad_utils.h"

namespace linea::train {
namespace {

Tensor param_with_grad(const std::vector<double>& grad, const Shape& shape, DType dtype = kFloat32) {
  Tensor p = zeros(shape, dtype);
  p.requires_grad_(true);
  p.set_grad(to(from_vector(grad, shape), dtype));
  return p;
}

TEST(GradNorm, IsTheL2NormOverAllGradients) {
  const std::vector<Tensor> params = {param_with_grad({3, 0, 4, 0}, {2, 2}), param_with_grad({12}, {1}, kFloat64),
                                      zeros({3}).requires_grad_(true)};  // no gradient: skipped
  EXPECT_DOUBLE_EQ(grad_norm(params), 13.0);
  EXPECT_EQ(grad_norm({}), 0.0);
}

TEST(GradNorm, Float32GradientsDoNotOverflowWhenSquared) {
  const std::vector<Tensor> params = {param_with_grad({3e30, 4e30}, {2})};  // squares overflow float32
  EXPECT_NEAR(grad_norm(params) / 5e30, 1.0, 1e-6);
}

// The fused pass under grad_norm: each tensor's sum of squares in double, over several of its
// fixed blocks, for contiguous and strided tensors of either dtype.
TEST(SumSquares, MatchesTheSumOfSquaredValues) {
  Generator gen(4);
  const Tensor big = randn({300, 700}, kFloat32, &gen), small = randn({5, 3}, kFloat64, &gen);
  const std::vector<Tensor> xs = {big, t(big), small, zeros({0}, kFloat32)};
  const std::vector<double> got = sum_squares(xs).to_vector<double>();
  ASSERT_EQ(got.size(), 4u);
  const double expected_big = sum(to(big, kFloat64) * to(big, kFloat64)).item();
  EXPECT_NEAR(got[0], expected_big, 1e-12 * expected_big);
  EXPECT_NEAR(got[1], got[0], 1e-12 * got[0]);  // the same values, read through a transposed view
  EXPECT_NEAR(got[2], sum(small * small).item(), 1e-12);
  EXPECT_EQ(got[3], 0.0);
  EXPECT_LINEA_ERROR(sum_squares({}), "sum_squares", "at least one");
}

TEST(ClipGradNorm, ScalesDownToMaxNorm) {
  const std::vector<Tensor> params = {param_with_grad({3, 4}, {2}), param_with_grad({0, 12}, {1, 2})};
  const ClipResult r = clip_grad_norm(params, 6.5);
  EXPECT_DOUBLE_EQ(r.norm, 13.0);
  EXPECT_TRUE(r.finite);
  EXPECT_TRUE(r.clipped);
  EXPECT_NEAR(grad_norm(params), 6.5, 1e-5);
  EXPECT_TRUE(linea::testing::all_close(params[0].grad(), tensor({1.5, 2.0}, {2}), 1e-6));
}

TEST(ClipGradNorm, LeavesSmallGradientsAlone) {
  const std::vector<Tensor> params = {param_with_grad({3, 4}, {2})};
  const ClipResult r = clip_grad_norm(params, 5.0);
  EXPECT_FALSE(r.clipped);
  EXPECT_EQ(params[0].grad().to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_LINEA_ERROR(clip_grad_norm(params, 0.0), "max_norm");
}

TEST(ClipGradNorm, ReportsNonFiniteAndTouchesNothing) {
  for (double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    const std::vector<Tensor> params = {param_with_grad({3, 4}, {2}), param_with_grad({1, bad}, {2})};
    const ClipResult r = clip_grad_norm(params, 1.0);
    EXPECT_FALSE(r.finite);
    EXPECT_FALSE(r.clipped);
    EXPECT_FALSE(std::isfinite(r.norm));
    EXPECT_EQ(params[0].grad().to_vector<float>(), (std::vector<float>{3, 4}));
    EXPECT_FALSE(grads_finite(params));
  }
}

// What a training step uses: the squared norm queued and read later, then clipping by a norm
// already known; max_norm <= 0 only reports.
TEST(ClipByNorm, ClipsByAGivenNormOrOnlyReports) {
  const std::vector<Tensor> params = {param_with_grad({3, 4}, {2}), param_with_grad({0, 12}, {1, 2})};
  EXPECT_DOUBLE_EQ(grad_norm_squared(params).item(), 169.0);
  EXPECT_FALSE(grad_norm_squared({zeros({3}).requires_grad_(true)}).defined());
  const ClipResult reported = clip_by_norm(params, 0.0, 13.0);
  EXPECT_FALSE(reported.clipped);
  EXPECT_TRUE(reported.finite);
  EXPECT_EQ(params[0].grad().to_vector<float>(), (std::vector<float>{3, 4}));
  EXPECT_FALSE(clip_by_norm(params, -1.0, std::numeric_limits<double>::quiet_NaN()).finite);
  const ClipResult clipped = clip_by_norm(params, 6.5, 13.0);
  EXPECT_TRUE(clipped.clipped);
  EXPECT_TRUE(linea::testing::all_close(params[0].grad(), tensor({1.5, 2.0}, {2}), 1e-6));
}

// What a training step decides and hands to the optimizer: the scale, with the gradients untouched.
TEST(PlanClip, GivesTheScaleAndLeavesTheGradientsAlone) {
  const ClipResult clipped = plan_clip(6.5, 13.0);
  EXPECT_TRUE(clipped.clipped);
  EXPECT_TRUE(clipped.finite);
  EXPECT_DOUBLE_EQ(clipped.norm, 13.0);
  EXPECT_DOUBLE_EQ(clipped.scale, 0.5);
  for (const ClipResult& kept : {plan_clip(13.0, 13.0), plan_clip(20.0, 13.0), plan_clip(0.0, 13.0)}) {
    EXPECT_FALSE(kept.clipped);
    EXPECT_EQ(kept.scale, 1.0);
  }
  const ClipResult bad = plan_clip(1.0, std::numeric_limits<double>::infinity());
  EXPECT_FALSE(bad.finite);
  EXPECT_FALSE(bad.clipped);
  EXPECT_EQ(bad.scale, 1.0);
  // clip_by_norm is the plan applied: the same decision, and the gradients scaled by it.
  const std::vector<Tensor> params = {param_with_grad({3, 4}, {2}, kFloat64), param_with_grad({0, 12}, {1, 2}, kFloat64)};
  const ClipResult applied = clip_by_norm(params, 6.5, 13.0);
  EXPECT_EQ(applied.scale, clipped.scale);
  EXPECT_EQ(params[1].grad().to_vector<double>(), (std::vector<double>{0, 6}));
}

TEST(GradsFinite, TrueForFiniteOrMissingGradients) {
  EXPECT_TRUE(grads_finite({param_with_grad({1e38, -1e38}, {2}), zeros({2}).requires_grad_(true)}));
  EXPECT_TRUE(grads_finite({}));
  EXPECT_TRUE(grads_finite({param_with_grad({}, {0})}));
}

}  // namespace
}  // namespace linea::train
