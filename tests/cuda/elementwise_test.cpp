// CUDA elementwise kernels against the CPU's: fill, arange, copy (every dtype pair), every unary
// and binary op, where; through strided, permuted and broadcast views, at awkward sizes.
#include <cmath>
#include <limits>

#include "tensor/backend.h"
#include "tensor/transfer.h"
#include "tests/cuda/parity.h"

namespace linea {
namespace {

using testing::gpu;
using testing::matches_cpu;
using testing::on_gpu;
using testing::random_normal;
using testing::same_values;

const DType kFloats[] = {kFloat32, kFloat64};
const DType kAll[] = {kFloat32, kFloat64, kInt64, kBool};

const Backend& cpu_kernels() { return backend_for(kCPU); }
const Backend& gpu_kernels() { return backend_for(gpu()); }

// Random values of any dtype: normals times 3, truncated for int64, x > 0 for bool.
Tensor random_any(const Shape& shape, DType dtype, uint64_t seed) {
  const Tensor x = random_normal(shape, kFloat64, seed) * 3.0;
  if (dtype == kBool) return gt(x, scalar_tensor(0.0, kFloat64));
  return to(x, dtype);
}

// Normal values rounded to halves (float64 on the CPU): ties for comparisons and max/min.
Tensor round_half(const Tensor& x) {
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v) e = std::round(e * 2.0) / 2.0;
  return from_vector(v, x.shape());
}

TEST(CudaElementwise, FillWritesThroughStridedViews) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kAll) {
    const Tensor c = zeros({7, 33}, dtype), g = zeros({7, 33}, {dtype, gpu()});
    cpu_kernels().fill(slice(c, 1, 1, 33, 3), 1.0);  // every third column
    gpu_kernels().fill(slice(g, 1, 1, 33, 3), 1.0);
    cpu_kernels().fill(select(c, 0, 4), -2.5);
    gpu_kernels().fill(select(g, 0, 4), -2.5);
    EXPECT_TRUE(same_values(g, c)) << dtype_name(dtype);
    EXPECT_TRUE(same_values(full({1000003}, 0.5, {dtype, gpu()}), full({1000003}, 0.5, dtype)));
  }
}

TEST(CudaElementwise, ArangeMatchesTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kAll) {
    EXPECT_TRUE(same_values(arange(-3.5, 250000.0, 0.25, {dtype, gpu()}), arange(-3.5, 250000.0, 0.25, dtype)))
        << dtype_name(dtype);
    EXPECT_TRUE(same_values(arange(1, {dtype, gpu()}), arange(1, dtype)));
    const Tensor c = zeros({30}, dtype), g = zeros({30}, {dtype, gpu()});
    cpu_kernels().arange(slice(c, 0, 2, 30, 3), 1.0, 2.0);  // a strided 1-D view
    gpu_kernels().arange(slice(g, 0, 2, 30, 3), 1.0, 2.0);
    EXPECT_TRUE(same_values(g, c)) << dtype_name(dtype);
  }
}

TEST(CudaElementwise, CopyConvertsEveryDtypePairThroughViews) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType from : kAll) {
    for (DType into : kAll) {
      const Tensor src = random_any({5, 7, 33}, from, 11);
      const Tensor src_g = on_gpu(src);
      // Permuted source, transposed destination.
      const Tensor dst = zeros({33, 5, 7}, into), dst_g = zeros({33, 5, 7}, {into, gpu()});
      cpu_kernels().copy(permute(src, {2, 0, 1}), dst);
      gpu_kernels().copy(permute(src_g, {2, 0, 1}), dst_g);
      EXPECT_TRUE(same_values(dst_g, dst)) << dtype_name(from) << " -> " << dtype_name(into);
      const Tensor t = zeros({7, 33}, into), t_g = zeros({7, 33}, {into, gpu()});
      cpu_kernels().copy(transpose(select(src, 0, 2), 0, 1), transpose(t, 0, 1));
      gpu_kernels().copy(transpose(select(src_g, 0, 2), 0, 1), transpose(t_g, 0, 1));
      EXPECT_TRUE(same_values(t_g, t)) << dtype_name(from) << " -> " << dtype_name(into);
      // A broadcast (stride-0) source.
      const Tensor row = random_any({1, 33}, from, 12);
      const Tensor b = zeros({9, 33}, into), b_g = zeros({9, 33}, {into, gpu()});
      cpu_kernels().copy(broadcast_view(row, {9, 33}, "test"), b);
      gpu_kernels().copy(broadcast_view(on_gpu(row), {9, 33}, "test"), b_g);
      EXPECT_TRUE(same_values(b_g, b)) << dtype_name(from) << " -> " << dtype_name(into);
    }
  }
}

TEST(CudaElementwise, CopiesAcrossDevicesAndDtypes) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor x = random_normal({1000003}, kFloat64, 3);
  const Tensor g = on_gpu(x);
  EXPECT_TRUE(same_values(g, x));
  EXPECT_TRUE(same_values(to(g, kFloat32), to(x, kFloat32)));
  const Tensor back = to(permute(reshape(g, {1000003, 1}), {1, 0}), kCPU);
  EXPECT_EQ(back.to_vector<double>(), x.to_vector<double>());
  // 1000003 = 7 * 142857 + 4: a narrowed, transposed view of a (7, 142857) prefix.
  const auto view = [](const Tensor& t) {
    return contiguous(transpose(reshape(narrow(t, 0, 0, 7 * 142857), {7, 142857}), 0, 1));
  };
  EXPECT_TRUE(same_values(view(g), view(x)));
}

// Copies whose layouts are rows (cuda/kernels/elementwise.cu: copy_rows) move units as wide as the
// rows' starts and widths allow: 16, 8, 4 or 1 bytes. Column offsets shift the starts off every
// alignment in turn; the large case runs more units than the grid has threads.
TEST(CudaElementwise, CopiesRowsAtEveryAlignment) {
  LINEA_SKIP_WITHOUT_CUDA();
  struct Case {
    int64_t rows, width, src_pitch, dst_pitch, src_col, dst_col;
  };
  const Case cases[] = {{16, 512, 2560, 512, 0, 0},  {16, 512, 512, 2560, 0, 1024}, {33, 20, 40, 60, 2, 4},
                        {33, 20, 41, 60, 1, 4},      {7, 3, 5, 9, 1, 2},            {5, 1, 3, 2, 2, 1},
                        {4500, 1029, 1100, 1031, 7, 1}};
  for (DType dtype : kAll) {
    for (const Case& c : cases) {
      const Tensor src = random_any({c.rows, c.src_pitch}, dtype, 17);
      const Tensor dst = random_any({c.rows, c.dst_pitch}, dtype, 18);
      const Tensor dst_g = on_gpu(dst);
      cpu_kernels().copy(narrow(src, 1, c.src_col, c.width), narrow(dst, 1, c.dst_col, c.width));
      gpu_kernels().copy(narrow(on_gpu(src), 1, c.src_col, c.width), narrow(dst_g, 1, c.dst_col, c.width));
      EXPECT_TRUE(same_values(dst_g, dst)) << dtype_name(dtype) << " " << c.rows << " rows of " << c.width;
    }
  }
}

struct UnaryCase {
  UnaryOp op;
  const char* name;
  bool positive;  // the op needs x > 0
  UnaryArgs args;
};

const UnaryCase kUnaryCases[] = {
    {UnaryOp::Neg, "neg", false, {}},        {UnaryOp::Exp, "exp", false, {}},
    {UnaryOp::Log, "log", true, {}},         {UnaryOp::Sqrt, "sqrt", true, {}},
    {UnaryOp::Rsqrt, "rsqrt", true, {}},     {UnaryOp::Abs, "abs", false, {}},
    {UnaryOp::Sin, "sin", false, {}},        {UnaryOp::Cos, "cos", false, {}},
    {UnaryOp::Tanh, "tanh", false, {}},      {UnaryOp::Sigmoid, "sigmoid", false, {}},
    {UnaryOp::LogSigmoid, "logsigmoid", false, {}}, {UnaryOp::Softplus, "softplus", false, {}},
    {UnaryOp::Relu, "relu", false, {}},      {UnaryOp::Elu, "elu", false, {1.3, 0}},
    {UnaryOp::GeluTanh, "gelu_tanh", false, {}}, {UnaryOp::GeluErf, "gelu_erf", false, {}},
    {UnaryOp::Silu, "silu", false, {}},      {UnaryOp::Pow, "pow", true, {2.5, 0}},
    {UnaryOp::Clamp, "clamp", false, {-0.5, 0.7}}, {UnaryOp::Sign, "sign", false, {}},
    {UnaryOp::Reciprocal, "reciprocal", false, {}}, {UnaryOp::Square, "square", false, {}},
    {UnaryOp::Log1p, "log1p", true, {}},     {UnaryOp::Expm1, "expm1", false, {}},
    {UnaryOp::Erf, "erf", false, {}},        {UnaryOp::Step, "step", false, {}},
    {UnaryOp::GeluTanhGrad, "gelu_tanh_grad", false, {}}, {UnaryOp::GeluErfGrad, "gelu_erf_grad", false, {}},
    {UnaryOp::EluGrad, "elu_grad", false, {0.7, 0}},
};

TEST(CudaElementwise, EveryUnaryOpMatchesTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kFloats) {
    for (const UnaryCase& c : kUnaryCases) {
      Tensor x = random_normal({37, 129}, dtype, 5) * 2.0;
      if (c.positive) x = abs(x) + 0.1;
      // Read through a transposed view, write contiguously; then a strided output.
      const Tensor xt = transpose(x, 0, 1), xt_g = transpose(on_gpu(x), 0, 1);
      const Tensor y = empty({129, 37}, dtype), y_g = empty({129, 37}, dtype, gpu());
      cpu_kernels().unary(c.op, xt, y, c.args);
      gpu_kernels().unary(c.op, xt_g, y_g, c.args);
      EXPECT_TRUE(matches_cpu(y_g, y)) << c.name << " " << dtype_name(dtype);
      const Tensor z = zeros({37, 129}, dtype), z_g = zeros({37, 129}, {dtype, gpu()});
      cpu_kernels().unary(c.op, xt, transpose(z, 0, 1), c.args);
      gpu_kernels().unary(c.op, xt_g, transpose(z_g, 0, 1), c.args);
      EXPECT_TRUE(matches_cpu(z_g, z)) << c.name << " " << dtype_name(dtype) << " (strided output)";
    }
  }
}

TEST(CudaElementwise, UnaryOnAMillionElements) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor x = random_normal({1000003}, kFloat32, 8);
  EXPECT_TRUE(matches_cpu(exp(on_gpu(x)), exp(x)));
  EXPECT_TRUE(matches_cpu(gelu(on_gpu(x), GeluApprox::Tanh), gelu(x, GeluApprox::Tanh)));
  const Tensor t = random_normal({1}, kFloat32, 9);
  EXPECT_TRUE(matches_cpu(tanh(on_gpu(t)), tanh(t)));
}

// Contiguous operands take a packed kernel (16 bytes per thread and step, the last n % 4 or n % 2
// elements one by one): sizes around the pack, a view one element in (not 16-byte aligned: the
// strided loop) and an output that is also an input.
TEST(CudaElementwise, PackedContiguousKernelsMatchTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kFloats)
    for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 1027, 4099}) {
      const std::string what = dtype_name(dtype) + std::string(" n ") + std::to_string(n);
      const Tensor x = random_normal({n + 1}, dtype, 20), y = random_normal({n + 1}, dtype, 21);
      const Tensor x_g = on_gpu(x), y_g = on_gpu(y);
      for (int64_t start : {0, 1}) {
        const Tensor a = slice(x, 0, start, start + n), b = slice(y, 0, start, start + n);
        const Tensor a_g = slice(x_g, 0, start, start + n), b_g = slice(y_g, 0, start, start + n);
        const Tensor out = empty({n}, dtype), out_g = empty({n}, dtype, gpu());
        cpu_kernels().unary(UnaryOp::Tanh, a, out, {});
        gpu_kernels().unary(UnaryOp::Tanh, a_g, out_g, {});
        EXPECT_TRUE(matches_cpu(out_g, out)) << "tanh " << what << " from " << start;
        cpu_kernels().unary_grad(UnaryOp::GeluErfGrad, a, b, out, {});
        gpu_kernels().unary_grad(UnaryOp::GeluErfGrad, a_g, b_g, out_g, {});
        EXPECT_TRUE(matches_cpu(out_g, out)) << "gelu grad " << what << " from " << start;
        cpu_kernels().binary(BinaryOp::Add, a, b, out);
        gpu_kernels().binary(BinaryOp::Add, a_g, b_g, out_g);
        EXPECT_TRUE(same_values(out_g, out)) << "add " << what << " from " << start;
      }
      // In place: out is the first input.
      const Tensor inplace = clone(x), inplace_g = on_gpu(x);
      cpu_kernels().binary(BinaryOp::Mul, inplace, y, inplace);
      gpu_kernels().binary(BinaryOp::Mul, inplace_g, y_g, inplace_g);
      EXPECT_TRUE(same_values(inplace_g, inplace)) << "in-place mul " << what;
    }
}

const BinaryOp kArithmetic[] = {BinaryOp::Add, BinaryOp::Sub,     BinaryOp::Mul,    BinaryOp::Div,
                                BinaryOp::Pow, BinaryOp::Maximum, BinaryOp::Minimum};
const BinaryOp kComparisons[] = {BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge};

// Runs a binary kernel on both devices with a (7, 1, 33) and b (5, 33) broadcast to (7, 5, 33).
void expect_binary_parity(BinaryOp op, const Tensor& a, const Tensor& b, DType out_dtype, bool exact) {
  const Shape shape{7, 5, 33};
  const Tensor out = empty(shape, out_dtype), out_g = empty(shape, out_dtype, gpu());
  cpu_kernels().binary(op, broadcast_view(a, shape, "test"), broadcast_view(b, shape, "test"), out);
  gpu_kernels().binary(op, broadcast_view(on_gpu(a), shape, "test"), broadcast_view(on_gpu(b), shape, "test"), out_g);
  if (exact) EXPECT_TRUE(same_values(out_g, out)) << static_cast<int>(op) << " " << a.describe();
  else EXPECT_TRUE(matches_cpu(out_g, out)) << static_cast<int>(op) << " " << a.describe();
}

TEST(CudaElementwise, EveryBinaryOpMatchesTheCpuWithBroadcasting) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kFloats) {
    // Halves, so that comparisons meet ties and max/min meet equal values.
    const Tensor a = to(round_half(random_normal({7, 1, 33}, kFloat64, 1)), dtype);
    const Tensor b = to(round_half(random_normal({5, 33}, kFloat64, 2)), dtype);
    for (BinaryOp op : kArithmetic) {
      if (op == BinaryOp::Pow) expect_binary_parity(op, abs(a) + 0.25, b, dtype, false);
      else if (op == BinaryOp::Div) expect_binary_parity(op, a, abs(b) + 0.5, dtype, false);
      else expect_binary_parity(op, a, b, dtype, true);
    }
    for (BinaryOp op : kComparisons) expect_binary_parity(op, a, b, kBool, true);
  }
  const Tensor ia = to(random_normal({7, 1, 33}, kFloat64, 3) * 2.0, kInt64);
  const Tensor ib = to(random_normal({5, 33}, kFloat64, 4) * 2.0, kInt64);
  for (BinaryOp op : kComparisons) expect_binary_parity(op, ia, ib, kBool, true);
  const Tensor ba = gt(ia, scalar_tensor(0, kInt64)), bb = gt(ib, scalar_tensor(0, kInt64));
  expect_binary_parity(BinaryOp::And, ba, bb, kBool, true);
  expect_binary_parity(BinaryOp::Or, ba, bb, kBool, true);
  expect_binary_parity(BinaryOp::Eq, ba, bb, kBool, true);
}

TEST(CudaElementwise, MaximumAndMinimumPropagateNan) {
  LINEA_SKIP_WITHOUT_CUDA();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : kFloats) {
    const Tensor a = to(from_vector<double>({nan, 1.0, 2.0, nan, -0.0}), dtype);
    const Tensor b = to(from_vector<double>({0.0, nan, 3.0, nan, 0.0}), dtype);
    EXPECT_TRUE(same_values(maximum(on_gpu(a), on_gpu(b)), maximum(a, b)));
    EXPECT_TRUE(same_values(minimum(on_gpu(a), on_gpu(b)), minimum(a, b)));
    EXPECT_TRUE(same_values(eq(on_gpu(a), on_gpu(b)), eq(a, b)));
  }
}

TEST(CudaElementwise, WhereMatchesTheCpuForEveryDtype) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Shape shape{7, 5, 33};
  const Tensor cond = gt(random_normal({5, 1}, kFloat64, 7), scalar_tensor(0.0, kFloat64));
  for (DType dtype : kAll) {
    const Tensor a = random_any({7, 1, 33}, dtype, 8), b = random_any({33}, dtype, 9);
    const Tensor out = empty(shape, dtype), out_g = empty(shape, dtype, gpu());
    cpu_kernels().where(broadcast_view(cond, shape, "t"), broadcast_view(a, shape, "t"), broadcast_view(b, shape, "t"), out);
    gpu_kernels().where(broadcast_view(on_gpu(cond), shape, "t"), broadcast_view(on_gpu(a), shape, "t"),
                        broadcast_view(on_gpu(b), shape, "t"), out_g);
    EXPECT_TRUE(same_values(out_g, out)) << dtype_name(dtype);
  }
}

TEST(CudaElementwise, BroadcastArithmeticOnAMillionElements) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor x = random_normal({1000003, 3}, kFloat32, 10), row = random_normal({3}, kFloat32, 11);
  EXPECT_TRUE(same_values(on_gpu(x) + on_gpu(row), x + row));
  EXPECT_TRUE(same_values(on_gpu(x) * 0.5, x * 0.5));
  const Tensor tiny = random_normal({1}, kFloat64, 12);
  EXPECT_TRUE(same_values(on_gpu(tiny) - on_gpu(tiny) * 2.0, tiny - tiny * 2.0));
}

TEST(CudaElementwise, ZeroSizeTensorsLaunchNothing) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor e = zeros({0, 5}, {kFloat32, gpu()});
  EXPECT_EQ((exp(e) + e).numel(), 0);
  EXPECT_EQ(to(e, kFloat64).numel(), 0);
}

}  // namespace
}  // namespace linea
