// CUDA reductions and cumulative sums against the CPU's: every path (a warp per row, blocks per
// row with partials, columns with partials), many dim sets, permuted inputs, NaN, ties, int64.
#include <cmath>
#include <limits>

#include "tensor/backend.h"
#include "tests/cuda/parity.h"

namespace linea {
namespace {

using testing::gpu;
using testing::matches_cpu;
using testing::on_gpu;
using testing::random_normal;
using testing::same_values;

const DType kFloats[] = {kFloat32, kFloat64};

// Sums in a different order than the CPU's, in double: float32 agrees to its rounding; float64
// to the rounding of the partial sums, which for a million normals (partial sums ~1e3, the CPU
// adding them one by one) is ~1e-10 in absolute terms.
double rtol(DType dtype) { return dtype == kFloat64 ? 1e-11 : 1e-6; }
double atol(DType dtype) { return dtype == kFloat64 ? 1e-9 : 1e-5; }

struct ReduceCase {
  Shape shape;
  std::vector<int64_t> dims;
};

const ReduceCase kCases[] = {
    {{1}, {0}},
    {{3}, {0}},
    {{1000003}, {0}},          // one long row: chunked blocks and a combine pass
    {{37, 1025}, {1}},         // blocks per row
    {{37, 1025}, {0}},         // columns
    {{37, 1025}, {0, 1}},
    {{5, 7, 33}, {0}},
    {{5, 7, 33}, {1}},         // strided rows
    {{5, 7, 33}, {2}},         // a warp per row
    {{5, 7, 33}, {0, 2}},
    {{5, 7, 33}, {1, 2}},
    {{5, 7, 33}, {0, 1}},      // a bias gradient's shape
    {{2, 3, 4, 5}, {1, 3}},
    {{2, 3, 4, 5}, {0, 2, 3}},
    {{4000, 3}, {0}},          // long short columns: chunked columns
    {{4000, 3}, {1}},          // very short rows: a thread per row
    {{3, 4000}, {1}},
    {{1, 70001}, {1}},
    {{300, 2, 700}, {0, 2}},
    {{6, 1, 5}, {1}},          // reducing a size-1 dim
};

TEST(CudaReduce, SumMaxMinMatchTheCpuOverManyDimSets) {
  LINEA_SKIP_WITHOUT_CUDA();
  uint64_t seed = 100;
  for (DType dtype : kFloats) {
    for (const ReduceCase& c : kCases) {
      const Tensor x = random_normal(c.shape, dtype, ++seed);
      const Tensor g = on_gpu(x);
      const std::string what = shape_str(c.shape) + " dims " + shape_str(c.dims) + " " + dtype_name(dtype);
      EXPECT_TRUE(matches_cpu(sum(g, c.dims), sum(x, c.dims), rtol(dtype), atol(dtype))) << "sum " << what;
      EXPECT_TRUE(same_values(amax(g, c.dims, true), amax(x, c.dims, true))) << "amax " << what;
      EXPECT_TRUE(same_values(amin(g, c.dims), amin(x, c.dims))) << "amin " << what;
      EXPECT_TRUE(matches_cpu(mean(g, c.dims), mean(x, c.dims), rtol(dtype), atol(dtype))) << "mean " << what;
    }
  }
}

TEST(CudaReduce, PermutedInputsAreReadInPlace) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kFloats) {
    const Tensor x = random_normal({33, 7, 65}, dtype, 7);
    const Tensor xp = permute(x, {2, 0, 1}), gp = permute(on_gpu(x), {2, 0, 1});  // (65, 33, 7)
    for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 1}, {1, 2}, {0, 2}, {}}) {
      EXPECT_TRUE(matches_cpu(sum(gp, dims), sum(xp, dims), rtol(dtype), atol(dtype))) << shape_str(dims);
      EXPECT_TRUE(same_values(amax(gp, dims), amax(xp, dims))) << shape_str(dims);
    }
    const Tensor row = random_normal({1, 300}, dtype, 8);
    const Tensor expanded = expand(row, {50, 300}), expanded_g = expand(on_gpu(row), {50, 300});
    EXPECT_TRUE(matches_cpu(sum(expanded_g, {0}), sum(expanded, {0}), rtol(dtype), atol(dtype)));
  }
}

TEST(CudaReduce, ArgmaxArgminTakeTheFirstExtremeAndTheFirstNan) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kFloats) {
    // Small integers: rows full of ties.
    std::vector<double> v = random_normal({40, 3000}, kFloat64, 9).to_vector<double>();
    for (double& e : v) e = std::round(e);
    v[5 * 3000 + 17] = std::nan("");     // row 5: a NaN wins
    v[6 * 3000 + 2999] = std::nan("");   // row 6: at the very end
    v[7 * 3000 + 100] = std::nan("");    // row 7: two NaNs, the first one wins
    v[7 * 3000 + 5] = std::nan("");
    const Tensor x = to(from_vector(v, {40, 3000}), dtype);
    const Tensor g = on_gpu(x);
    for (int64_t dim : {0, 1}) {
      EXPECT_TRUE(same_values(argmax(g, dim), argmax(x, dim))) << "dim " << dim << " " << dtype_name(dtype);
      EXPECT_TRUE(same_values(argmin(g, dim), argmin(x, dim))) << "dim " << dim << " " << dtype_name(dtype);
      EXPECT_TRUE(same_values(amax(g, {dim}), amax(x, {dim})));
      EXPECT_TRUE(same_values(amin(g, {dim}), amin(x, {dim})));
    }
    const Tensor t = narrow(x, 0, 0, 3);  // (3, 3000) over dim 0: short columns
    EXPECT_TRUE(same_values(argmax(on_gpu(t), 0), argmax(t, 0)));
    const Tensor one = to(from_vector<double>({2.0}), dtype);
    EXPECT_TRUE(same_values(argmax(on_gpu(one), 0), argmax(one, 0)));
    const Tensor longest = random_normal({1000003}, dtype, 10);
    EXPECT_TRUE(same_values(argmax(on_gpu(longest), 0), argmax(longest, 0)));
    EXPECT_TRUE(same_values(argmin(on_gpu(longest), 0), argmin(longest, 0)));
  }
}

TEST(CudaReduce, Int64ReducesExactly) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor x = to(random_normal({17, 301}, kFloat64, 11) * 1000.0, kInt64);
  const Tensor g = on_gpu(x);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin}) {
    for (int64_t dim : {0, 1}) {
      Shape shape = x.shape();
      shape[dim] = 1;
      const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
      const Tensor out = empty(shape, kInt64), out_g = empty(shape, kInt64, gpu());
      backend_for(kCPU).reduce(op, x, {dim}, out);
      backend_for(gpu()).reduce(op, g, {dim}, out_g);
      EXPECT_TRUE(same_values(out_g, out)) << static_cast<int>(op) << " dim " << dim << (arg ? " (arg)" : "");
    }
  }
}

TEST(CudaReduce, MaxPropagatesNanAndSumsAreDeterministic) {
  LINEA_SKIP_WITHOUT_CUDA();
  std::vector<double> v(5000, 1.0);
  v[4321] = std::nan("");
  const Tensor x = from_vector(v, {5000});
  EXPECT_TRUE(std::isnan(amax(on_gpu(x)).item()));
  EXPECT_TRUE(std::isnan(amin(on_gpu(x)).item()));
  const Tensor big = on_gpu(random_normal({1000003}, kFloat32, 12));
  EXPECT_EQ(sum(big).item(), sum(big).item());  // same bits, run after run
  EXPECT_EQ(sum(zeros({0, 3}, {kFloat32, gpu()}), {0}).to_vector<float>(), std::vector<float>(3, 0.0f));
}

TEST(CudaReduce, CumsumForwardAndReverseAlongEveryDim) {
  LINEA_SKIP_WITHOUT_CUDA();
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{1}, 0},        {{3}, 0},         {{1000}, 0},       {{3, 5000}, 1},  // block scans
      {{700, 3}, 0},   {{700, 3}, 1},    {{5, 7, 33}, 0},   {{5, 7, 33}, 1},
      {{5, 7, 33}, 2}, {{1000003}, 0}};
  for (DType dtype : kFloats) {
    for (const auto& [shape, dim] : cases) {
      const Tensor x = random_normal(shape, dtype, 13);
      for (bool reverse : {false, true}) {
        const std::string what = shape_str(shape) + " dim " + std::to_string(dim) + (reverse ? " reverse " : " ") + dtype_name(dtype);
        // Partial sums of up to a million normals reach ~1e3: float64 agrees to ~1e-13 of that.
        EXPECT_TRUE(matches_cpu(cumsum(on_gpu(x), dim, reverse), cumsum(x, dim, reverse), rtol(dtype),
                                dtype == kFloat64 ? 1e-9 : 1e-4))
            << what;
      }
    }
    // A permuted input is made contiguous first.
    const Tensor y = random_normal({40, 300}, dtype, 14);
    EXPECT_TRUE(matches_cpu(cumsum(transpose(on_gpu(y), 0, 1), 1), cumsum(transpose(y, 0, 1), 1), rtol(dtype), atol(dtype)));
  }
}

// The gradient norm's fused pass: the CPU's sums (in double, to reassociation) and the same bits
// on every run, over sizes from one element to several blocks' worth.
TEST(CudaReduce, SumSquaresMatchesTheCpuAndRepeats) {
  LINEA_SKIP_WITHOUT_CUDA();
  const std::vector<Tensor> cpu = {random_normal({1}, kFloat32, 1), random_normal({1000, 513}, kFloat32, 2),
                                   random_normal({7, 9}, kFloat64, 3), random_normal({4099, 768}, kFloat32, 4)};
  std::vector<Tensor> dev;
  for (const Tensor& x : cpu) dev.push_back(on_gpu(x));
  const std::vector<double> want = sum_squares(cpu).to_vector<double>();
  const Tensor first = sum_squares(dev), second = sum_squares(dev);
  EXPECT_TRUE(same_values(first, to(second, kCPU)));
  const std::vector<double> got = to(first, kCPU).to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12 * want[i]) << "tensor " << i;
}

// The multi-tensor launch: many tensors of awkward sizes (zero, one, a block's share and one
// over, the cap of blocks per tensor and past it), the dtypes interleaved (so a launch per dtype
// writes its partials among the other's), and non-contiguous views. Each tensor's sum is the CPU's
// and the same bits as when it is summed alone: its neighbours in the list change nothing.
TEST(CudaReduce, SumSquaresOfManyTensorsOfMixedSizesAndDtypes) {
  LINEA_SKIP_WITHOUT_CUDA();
  const std::vector<std::pair<Shape, DType>> specs = {
      {{1}, kFloat32},     {{7}, kFloat64},         {{300}, kFloat32},     {{0}, kFloat32},
      {{4097}, kFloat64},  {{2048}, kFloat32},      {{70000}, kFloat32},   {{3, 5, 2049}, kFloat64},
      {{(1 << 20) + 3}, kFloat32},                  {{600001}, kFloat64},  {{1}, kFloat64}};
  std::vector<Tensor> cpu, dev;
  uint64_t seed = 200;
  for (const auto& [shape, dtype] : specs) {
    cpu.push_back(random_normal(shape, dtype, ++seed));
    dev.push_back(on_gpu(cpu.back()));
  }
  const Tensor wide = random_normal({257, 300}, kFloat64, ++seed), flat = random_normal({9001}, kFloat32, ++seed);
  cpu.push_back(transpose(wide, 0, 1));
  dev.push_back(transpose(on_gpu(wide), 0, 1));
  cpu.push_back(slice(flat, 0, 1, 9001, 3));
  dev.push_back(slice(on_gpu(flat), 0, 1, 9001, 3));
  ASSERT_FALSE(dev[dev.size() - 1].is_contiguous());
  ASSERT_FALSE(dev[dev.size() - 2].is_contiguous());

  const std::vector<double> want = sum_squares(cpu).to_vector<double>();
  const Tensor first = sum_squares(dev);
  EXPECT_TRUE(same_values(first, to(sum_squares(dev), kCPU)));
  const std::vector<double> got = to(first, kCPU).to_vector<double>();
  ASSERT_EQ(got.size(), dev.size());
  for (size_t i = 0; i < dev.size(); ++i) {
    const std::string what = "tensor " + std::to_string(i) + ": " + dev[i].describe();
    EXPECT_NEAR(got[i], want[i], 1e-12 * want[i]) << what;
    EXPECT_EQ(got[i], sum_squares({dev[i]}).item()) << what << " summed alone";
  }
}

}  // namespace
}  // namespace linea
