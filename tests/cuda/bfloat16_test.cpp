// bfloat16 on the GPU against the CPU: conversions bit for bit (float32 and float64 sources with
// values at and around rounding ties, the special values, subnormals), the kernels written for
// every dtype (fill, comparisons, where, gather, strided copies), the reductions, the elementwise
// math (unary and binary ops, the activations' fused gradients), softmax, cross-entropy, and the bfloat16
// GEMM on cuBLAS held to the error bound of float32 accumulation at awkward sizes, batched, with
// stored transposes, and with the gradient through to().
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "tests/cuda/parity.h"
#include "tests/tensor/bf16_matmul_bound.h"
#include "tests/tensor/bf16_cases.h"

namespace linea::testing {
namespace {

// Random float32 bit patterns (NaNs, infinities and subnormals among them), half of them within a
// few units of a bfloat16 tie, as float32 or float64 values.
Tensor awkward_values(int64_t n, DType dtype, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u = rng();
    if (i % 2) u = (u & 0xffff0000u) | static_cast<uint32_t>(0x8000 + static_cast<int>(rng() % 5) - 2);
    float f;
    std::memcpy(&f, &u, sizeof f);
    values[i] = f;
    if (dtype == kFloat64 && i % 3 == 0) values[i] *= 1 + 1e-12;  // between float32 values
  }
  return to(from_vector(values, {n}), dtype);
}

TEST(CudaBFloat16, ConversionsMatchTheCpuBitForBit) {
  LINEA_SKIP_WITHOUT_CUDA();
  const uint64_t seed = std::random_device{}();
  for (DType source : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(source));
    const Tensor x = awkward_values(100003, source, seed);
    const Tensor cpu = to(x, kBFloat16), gpu = to(on_gpu(x), kBFloat16);
    ASSERT_EQ(gpu.dtype(), kBFloat16);
    EXPECT_TRUE(same_values(gpu, cpu));
    EXPECT_TRUE(same_values(to(gpu, kFloat64), to(cpu, kFloat64)));
  }
  // Every bfloat16 pattern widens alike on both devices.
  std::vector<double> all(65536);
  for (uint32_t b = 0; b < 65536; ++b) all[b] = bfloat16::from_bits(static_cast<uint16_t>(b));
  const Tensor patterns = to(from_vector(all, {65536}), kBFloat16);
  EXPECT_TRUE(same_values(to(on_gpu(patterns), kFloat32), to(patterns, kFloat32)));
  // float32 <-> bfloat16 between contiguous tensors take a packed kernel (4 a step, a tail past
  // whole packs); views that start off a pack's alignment take the strided loop. Both alike.
  const Tensor f = awkward_values(4099, kFloat32, seed + 1), g = on_gpu(f);
  for (const int64_t start : {0, 1, 4}) {
    SCOPED_TRACE("from element " + std::to_string(start));
    const Tensor cpu = to(narrow(f, 0, start, 4099 - start), kBFloat16);
    const Tensor gpu = to(narrow(g, 0, start, 4099 - start), kBFloat16);
    EXPECT_TRUE(same_values(gpu, cpu));
    EXPECT_TRUE(same_values(to(narrow(gpu, 0, start % 2, 4098 - start), kFloat32),
                            to(narrow(cpu, 0, start % 2, 4098 - start), kFloat32)));
  }
  // Strided (transposed) copies and integers.
  const Tensor m = to(random_normal({33, 17}, kFloat32, seed), kBFloat16);
  EXPECT_TRUE(same_values(contiguous(transpose(on_gpu(m), 0, 1)), contiguous(transpose(m, 0, 1))));
  const Tensor ints = arange(-300, 300);
  EXPECT_TRUE(same_values(to(on_gpu(ints), kBFloat16), to(ints, kBFloat16)));
}

// The elementwise math on bfloat16 computes in float32 on both devices and rounds once. CUDA's
// float32 functions (expf, tanhf, erff, ...) may differ from glibc's in the last place, which
// can move the rounding to bfloat16 by one unit: at most a unit apart, 2^-7 of the value. Where
// the float32 formula cancels, that last place is large beside the result: GELU's
// 0.5 x (1 + erf(x / sqrt 2)) near x = -8 takes 1 + erf from values near -1, whose ulp is 2^-24,
// so two functions' results two ulps apart differ by up to 0.5 * 8 * 2^-23 = 4.8e-7 there (and its
// derivative likewise): an absolute 1e-6 besides the unit. The packed path (contiguous, 16-byte
// aligned, 1015 elements: a tail past whole packs of 8) and the strided one (a transposed view).
TEST(CudaBFloat16, ElementwiseMathMatchesTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  const uint64_t seed = std::random_device{}();
  const double unit = std::ldexp(1.0, -7), cancelled = 1e-6;
  const Tensor normal = to(random_normal({5, 203}, kFloat32, seed) * 2.0, kBFloat16);
  const Tensor positive = to(abs(random_normal({5, 203}, kFloat32, seed + 1)) + 0.05, kBFloat16);
  const Tensor dy = to(random_normal({5, 203}, kFloat32, seed + 2), kBFloat16);
  for (const UnaryCase& c : bf16_unary_cases()) {
    const Tensor x = c.positive ? positive : normal;
    for (const bool strided : {false, true}) {
      const auto view = [&](const Tensor& t) { return strided ? transpose(t, 0, 1) : t; };
      const Tensor on_device = c.f(view(on_gpu(x)));
      EXPECT_EQ(on_device.dtype(), kBFloat16) << c.name;
      EXPECT_TRUE(matches_cpu(on_device, c.f(view(x)), unit, cancelled)) << c.name << (strided ? " strided" : "");
    }
    // The backward of the activations with a fused derivative kernel (dy f'(x) from x, one
    // rounding) and of the ops whose derivative is exact arithmetic. (The others' backward reuses
    // a forward value that may already be a unit apart, and 1 - tanh^2 near 1 makes that any
    // relative amount.)
    const std::string name = c.name;
    if (name != "relu" && name != "elu" && name != "gelu" && name != "gelu_tanh" && name != "square" &&
        name != "abs" && name != "clamp")
      continue;
    const Tensor leaf = clone(x).requires_grad_(), device_leaf = on_gpu(x).requires_grad_();
    const Tensor g = grad(c.f(device_leaf), {device_leaf}, on_gpu(dy))[0];
    EXPECT_TRUE(matches_cpu(g, grad(c.f(leaf), {leaf}, dy)[0], unit, cancelled)) << c.name << " gradient";
  }
  const Tensor row = to(random_normal({203}, kFloat32, seed + 3), kBFloat16);
  for (const Tensor& b : {positive, row}) {
    const Tensor ga = on_gpu(normal), gb = on_gpu(b);
    EXPECT_TRUE(matches_cpu(ga + gb, normal + b, unit, 0));
    EXPECT_TRUE(matches_cpu(ga - gb, normal - b, unit, 0));
    EXPECT_TRUE(matches_cpu(ga * gb, normal * b, unit, 0));
    EXPECT_TRUE(matches_cpu(ga / gb, normal / b, unit, 0));
    EXPECT_TRUE(matches_cpu(pow(abs(ga) + 0.5, gb), pow(abs(normal) + 0.5, b), unit, 0));
    EXPECT_TRUE(same_values(maximum(ga, gb), maximum(normal, b)));
    EXPECT_TRUE(same_values(minimum(ga, gb), minimum(normal, b)));
  }
}

// Softmax and log-softmax on bfloat16, along the last dim (rows) and a leading one (lines):
// within a unit of the CPU forward (the GPU's log-sum-exp in float32, the CPU's in double, move a
// rounding by at most one unit); each device's backward lies within bf16_softmax_gradient_bound of
// the exact gradient, so the two within twice it.
TEST(CudaBFloat16, SoftmaxMatchesTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  const uint64_t seed = std::random_device{}();
  const double unit = std::ldexp(1.0, -7);
  const Tensor x = to(random_normal({9, 203}, kFloat32, seed) * 3.0, kBFloat16);
  const Tensor dy = to(random_normal({9, 203}, kFloat32, seed + 1), kBFloat16);
  for (const int64_t dim : {-1, 0})
    for (const bool log : {false, true}) {
      auto f = [&](const Tensor& t) { return log ? log_softmax(t, dim) : softmax(t, dim); };
      const std::string what = std::string(log ? "log_softmax" : "softmax") + " dim " + std::to_string(dim);
      EXPECT_TRUE(matches_cpu(f(on_gpu(x)), f(x), unit, 1e-30)) << what;
      const Tensor leaf = clone(x).requires_grad_(), device_leaf = on_gpu(x).requires_grad_();
      const Tensor bound = 2.0 * bf16_softmax_gradient_bound(x, dy, dim, log);
      EXPECT_TRUE(within_bound(grad(f(device_leaf), {device_leaf}, on_gpu(dy))[0], grad(f(leaf), {leaf}, dy)[0], bound))
          << what << " gradient";
    }
}

// Cross-entropy on bfloat16 logits: rows of every alignment (203 classes: a row's first 16-byte
// boundary moves from row to row), whole packs (8192) and a block per row (50257), ignored
// targets among them. The float32 losses within float32 rounding of the CPU's; the bfloat16
// gradient within one unit (the GPU's exp and the CPU's may round a product either way).
TEST(CudaBFloat16, CrossEntropyMatchesTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  const uint64_t seed = std::random_device{}();
  for (const int64_t classes : {203, 8192, 50257}) {
    const Tensor x = to(random_normal({37, classes}, kFloat32, seed + classes) * 3.0, kBFloat16);
    std::vector<int64_t> targets = randint(0, classes, {37}).to_vector<int64_t>();
    for (size_t i = 3; i < targets.size(); i += 7) targets[i] = -100;
    const Tensor t = from_vector(targets, {37});
    const Tensor dloss = random_normal({37}, kFloat32, seed + 1);
    const std::string what = std::to_string(classes) + " classes, seed " + std::to_string(seed);
    const Tensor leaf = clone(x).requires_grad_(), device_leaf = on_gpu(x).requires_grad_();
    const Tensor loss = cross_entropy(leaf, t, -100, Reduction::None);
    const Tensor device_loss = cross_entropy(device_leaf, on_gpu(t), -100, Reduction::None);
    EXPECT_EQ(device_loss.dtype(), kFloat32) << what;
    EXPECT_TRUE(matches_cpu(device_loss, loss, 1e-5, 1e-5)) << what;
    const Tensor g = grad(device_loss, {device_leaf}, on_gpu(dloss))[0];
    EXPECT_EQ(g.dtype(), kBFloat16) << what;
    EXPECT_TRUE(matches_cpu(g, grad(loss, {leaf}, dloss)[0], std::ldexp(1.0, -7), 1e-7)) << what;
  }
}

// The rotary embedding on bfloat16: the warp-per-row kernel for heads of up to 64 dims all
// rotated, the general loop otherwise (dims past the rotated ones, a transposed input); within one
// bfloat16 unit of the CPU (float32 math on both, contracted differently).
TEST(CudaBFloat16, RotaryMatchesTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  const uint64_t seed = std::random_device{}();
  const double unit = std::ldexp(1.0, -7);
  for (const auto& [dh, half] : {std::pair<int64_t, int64_t>{64, 32}, {10, 4}, {128, 64}}) {
    const Tensor x = to(random_normal({2, 3, 37, dh}, kFloat32, seed + dh), kBFloat16);
    const Tensor angles = random_normal({37, half}, kFloat32, seed + 1) * 3.0;
    const Tensor c = cos(angles), s = sin(angles);
    const std::string what = "dh " + std::to_string(dh) + " seed " + std::to_string(seed);
    // x as it is, and x read through a transpose of a (2, 37, 3, dh) tensor (strided rows).
    const Tensor strided = transpose(contiguous(transpose(x, 1, 2)), 1, 2);
    for (const Tensor& xin : {x, strided})
      EXPECT_TRUE(
          matches_cpu(rotary_embedding(on_gpu(xin), on_gpu(c), on_gpu(s)), rotary_embedding(xin, c, s), unit, 1e-6))
          << what;
    const Tensor dy = to(random_normal({2, 3, 37, dh}, kFloat32, seed + 2), kBFloat16);
    const Tensor leaf = clone(x).requires_grad_(), device_leaf = on_gpu(x).requires_grad_();
    const Tensor g = grad(rotary_embedding(device_leaf, on_gpu(c), on_gpu(s)), {device_leaf}, on_gpu(dy))[0];
    EXPECT_TRUE(matches_cpu(g, grad(rotary_embedding(leaf, c, s), {leaf}, dy)[0], unit, 1e-6)) << what << " gradient";
  }
}

TEST(CudaBFloat16, FillComparisonsWhereGatherAndReductions) {
  LINEA_SKIP_WITHOUT_CUDA();
  const uint64_t seed = std::random_device{}();
  const Tensor a = to(random_normal({7, 300}, kFloat32, seed), kBFloat16);
  const Tensor b = to(random_normal({7, 300}, kFloat32, seed + 1), kBFloat16);
  const Tensor ga = on_gpu(a), gb = on_gpu(b);
  EXPECT_TRUE(same_values(full({5}, -0.3, {kBFloat16, gpu()}), full({5}, -0.3, kBFloat16)));
  EXPECT_TRUE(same_values(lt(ga, gb), lt(a, b)));
  EXPECT_TRUE(same_values(where(ge(ga, gb), ga, gb), where(ge(a, b), a, b)));
  const Tensor index = randint(0, 300, {7, 40}, kCPU);
  EXPECT_TRUE(same_values(gather(ga, 1, on_gpu(index)), gather(a, 1, index)));
  EXPECT_TRUE(same_values(amax(ga, {1}), amax(a, {1})));
  EXPECT_TRUE(same_values(argmax(ga, 0), argmax(a, 0)));
  // Sums: float32 on both, in different orders, each rounded once to bfloat16: a unit apart at most.
  EXPECT_TRUE(matches_cpu(sum(ga, {1}), sum(a, {1}), std::ldexp(1.0, -7), 1e-6));
}

TEST(CudaBFloat16, MatmulOnTheTensorCoresWithinTheBound) {
  LINEA_SKIP_WITHOUT_CUDA();
  const uint64_t seed = std::random_device{}();
  struct Sizes {
    int64_t batch, m, k, n;
  };
  for (const Sizes& s : {Sizes{1, 1, 1, 1}, Sizes{1, 17, 100, 33}, Sizes{3, 65, 513, 127}, Sizes{2, 256, 2048, 64}}) {
    SCOPED_TRACE(::testing::Message() << s.batch << "x" << s.m << "x" << s.k << "x" << s.n);
    const Tensor a = to(random_normal({s.batch, s.m, s.k}, kFloat32, seed), kBFloat16);
    const Tensor b = to(random_normal({s.k, s.n}, kFloat32, seed + 1), kBFloat16);
    const Tensor c = matmul(on_gpu(a), on_gpu(b));
    ASSERT_EQ(c.dtype(), kBFloat16);
    EXPECT_TRUE(within_bf16_matmul_bound(c, a, b));
    const Tensor bt = to(random_normal({s.batch, s.n, s.k}, kFloat32, seed + 2), kBFloat16);
    EXPECT_TRUE(within_bf16_matmul_bound(matmul(on_gpu(a), transpose(on_gpu(bt), 1, 2)), a, transpose(bt, 1, 2)));
  }
}

// matmul_bf16 (mixed precision's product, float32 result) on cuBLAS against the bound without the
// final rounding, and its gradients against the CPU's.
TEST(CudaBFloat16, WideningProductAndItsGradients) {
  LINEA_SKIP_WITHOUT_CUDA();
  const uint64_t seed = std::random_device{}();
  const Tensor x = random_normal({4, 33, 200}, kFloat32, seed), w = random_normal({72, 200}, kFloat32, seed + 1);
  const Tensor dy = random_normal({4, 33, 72}, kFloat32, seed + 2);
  auto run = [&](Device device) {
    const Tensor xd = detach(to(x, device)).requires_grad_(), wd = detach(to(w, device)).requires_grad_();
    const Tensor y = matmul_bf16(xd, t(wd));
    std::vector<Tensor> out = grad(y, {xd, wd}, to(dy, device));
    out.insert(out.begin(), y);
    return out;
  };
  const auto cpu = run(kCPU), gpu_out = run(gpu());
  const Tensor x16 = to(x, kBFloat16), w16 = to(w, kBFloat16), dy16 = to(dy, kBFloat16);
  EXPECT_EQ(gpu_out[0].dtype(), kFloat32);
  EXPECT_TRUE(within_bf16_matmul_bound(gpu_out[0], x16, t(w16)));
  EXPECT_TRUE(within_bf16_matmul_bound(gpu_out[1], dy16, w16));
  EXPECT_TRUE(within_bf16_matmul_bound(gpu_out[2], t(reshape(dy16, {-1, 72})), reshape(x16, {-1, 200})));
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_TRUE(matches_cpu(gpu_out[i], cpu[i], 1e-3, 1e-3)) << i;
}

// Mixed precision as a Linear layer would run it: float32 tensors, the product in bfloat16; the
// gradients come back in float32 through to() and are bfloat16 products themselves.
TEST(CudaBFloat16, GradientsThroughABfloat16Product) {
  LINEA_SKIP_WITHOUT_CUDA();
  const uint64_t seed = std::random_device{}();
  const Tensor x = random_normal({24, 96}, kFloat32, seed), w = random_normal({96, 40}, kFloat32, seed + 1);
  const Tensor dy = random_normal({24, 40}, kFloat32, seed + 2);
  auto gradients = [&](Device device) {
    const Tensor xd = detach(to(x, device)).requires_grad_(), wd = detach(to(w, device)).requires_grad_();
    const Tensor y = to(matmul(to(xd, kBFloat16), to(wd, kBFloat16)), kFloat32);
    return grad(y, {xd, wd}, to(dy, device));
  };
  const auto cpu = gradients(kCPU), gpu_grads = gradients(gpu());
  // dx = bf16(dy) bf16(w)^T (k = 40), dw = bf16(x)^T bf16(dy) (k = 24), each within its bound.
  const Tensor dy16 = to(dy, kBFloat16), x16 = to(x, kBFloat16), w16 = to(w, kBFloat16);
  // (They are bfloat16 products widened by to()'s backward: as bfloat16, exactly, for the bound.)
  for (const auto& g : {cpu, gpu_grads}) {
    EXPECT_EQ(g[0].dtype(), kFloat32);
    EXPECT_TRUE(within_bf16_matmul_bound(to(g[0], kBFloat16), dy16, transpose(w16, 0, 1)));
    EXPECT_TRUE(within_bf16_matmul_bound(to(g[1], kBFloat16), transpose(x16, 0, 1), dy16));
  }
}

}  // namespace
}  // namespace linea::testing
