// Philox on CUDA draws the CPU's numbers: uniform bit for bit, normal to the last bit of log and
// cos (which differ between CUDA's and glibc's libm), for the same seed and offset.
#include "tests/cuda/parity.h"

namespace linea {
namespace {

using testing::gpu;
using testing::matches_cpu;
using testing::same_values;

const DType kFloats[] = {kFloat32, kFloat64};

TEST(CudaRandom, UniformIsBitIdenticalToTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kFloats) {
    for (auto [low, high] : std::vector<std::pair<double, double>>{{0.0, 1.0}, {-2.0, 3.0}, {1.0, 1.0}}) {
      Generator on_cpu(42), on_device(42);
      const Tensor c = uniform({1000003}, low, high, dtype, &on_cpu);
      const Tensor g = uniform({1000003}, low, high, {dtype, gpu()}, &on_device);
      EXPECT_TRUE(same_values(g, c)) << dtype_name(dtype) << " [" << low << ", " << high << ")";
      // The generators advanced alike: the next draws agree too.
      EXPECT_TRUE(same_values(rand({3}, {dtype, gpu()}, &on_device), rand({3}, dtype, &on_cpu)));
    }
  }
}

TEST(CudaRandom, NormalMatchesTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kFloats) {
    Generator on_cpu(7), on_device(7);
    const Tensor c = randn({1000003}, dtype, &on_cpu);
    const Tensor g = randn({1000003}, {dtype, gpu()}, &on_device);
    // float64: libm's last bit; float32: a double a bit away can round to the neighbouring float.
    EXPECT_TRUE(matches_cpu(g, c, dtype == kFloat64 ? 1e-13 : 1e-6, dtype == kFloat64 ? 1e-13 : 1e-7))
        << dtype_name(dtype);
    const Tensor one_c = randn({1}, dtype, &on_cpu), one_g = randn({1}, {dtype, gpu()}, &on_device);
    EXPECT_TRUE(matches_cpu(one_g, one_c, 1e-6, 1e-7));
  }
}

TEST(CudaRandom, DropoutDrawsTheCpuMask) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor x = ones({257, 33}, kFloat32);
  Generator on_cpu(3), on_device(3);
  EXPECT_TRUE(same_values(dropout(testing::on_gpu(x), 0.3, true, &on_device), dropout(x, 0.3, true, &on_cpu)));
}

}  // namespace
}  // namespace linea
