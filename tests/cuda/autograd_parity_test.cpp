// Differentiable ops on CUDA tensors against the same ops on the CPU, forward AND backward: each
// case runs one function on CPU leaves and on GPU copies of them, then backpropagates the same
// random weighting of the output and compares the values and every input's gradient. float64
// tight, float32 within its rounding; GEMMs without TF32.
#include <functional>

#include "tests/cuda/parity.h"

namespace linea {
namespace {

using testing::gpu;
using testing::matches_cpu;
using testing::NoTf32;
using testing::on_gpu;
using testing::random_normal;

using Inputs = std::vector<Tensor>;

struct GradCase {
  const char* name;
  std::vector<Shape> shapes;
  std::function<Tensor(const Inputs&)> f;
  bool positive = false;  // inputs drawn as |x| + 0.5
};

// Integer positions below `high`, on the device of `like`.
Tensor ids_like(const Tensor& like, int64_t high, const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return to(randint(0, high, shape, kCPU, &gen), like.device());
}

Tensor flat(const Tensor& t) { return flatten(contiguous(t)); }

const GradCase kCases[] = {
    {"elementwise chain", {{37, 129}, {37, 129}},
     [](const Inputs& in) {
       const Tensor &a = in[0], &b = in[1];
       return gelu(a) * sigmoid(b) + softplus(a) - tanh(b) / (1.0 + exp(-abs(a)));
     }},
    {"unary family", {{3, 1001}},
     [](const Inputs& in) {
       const Tensor& x = in[0];
       return silu(x) + elu(x, 1.3) + gelu(x, GeluApprox::Tanh) + logsigmoid(x) + sin(x) * cos(x) +
              expm1(x * 0.1) + clamp(x, -0.5, 0.7) + square(x) + relu(x) + sign(x);
     }},
    {"positive domain", {{3, 1001}},
     [](const Inputs& in) {
       const Tensor& x = in[0];
       return sqrt(x) + rsqrt(x) + log(x) + log1p(x) + pow(x, 2.5) + reciprocal(x);
     },
     true},
    {"broadcast arithmetic", {{7, 1, 33}, {5, 33}},
     [](const Inputs& in) {
       const Tensor &a = in[0], &b = in[1];
       return (a + b) * (a - b) / (abs(b) + 1.0) + maximum(a, b) - minimum(a, b) * 2.0;
     }},
    {"broadcast pow", {{7, 1, 33}, {5, 33}}, [](const Inputs& in) { return pow(in[0], in[1]); }, true},
    {"reductions", {{5, 7, 33}},
     [](const Inputs& in) {
       const Tensor& x = in[0];
       return cat({flat(sum(x, {0, 2})), flat(mean(x, {1})), flat(amax(x, {2})), flat(amin(x, {0})),
                   flat(logsumexp(x, {1})), flat(var(x, {0, 1})), reshape(sum(x), {1})});
     }},
    {"matmul, shared transposed weight", {{4, 3, 5, 7}, {6, 7}},
     [](const Inputs& in) { return matmul(in[0], t(in[1])); }},
    {"matmul, broadcast batches", {{2, 1, 5, 7}, {1, 3, 7, 4}}, [](const Inputs& in) { return matmul(in[0], in[1]); }},
    {"composite softmax attention", {{2, 5, 8}, {2, 5, 8}, {2, 5, 8}},
     [](const Inputs& in) {
       const Tensor scores = matmul(in[0], transpose(in[1], 1, 2)) * 0.35;
       const Tensor e = exp(scores - detach(amax(scores, {2}, true)));
       return matmul(e / sum(e, {2}, true), in[2]);
     }},
    {"cumsum", {{5, 300}},
     [](const Inputs& in) { return cumsum(in[0], 1) + cumsum(in[0], 0, true) * 0.5; }},
    {"embedding", {{11, 6}}, [](const Inputs& in) { return embedding(in[0], ids_like(in[0], 11, {3, 17}, 51)); }},
    {"index_select", {{9, 5}},
     [](const Inputs& in) {
       return cat({flat(index_select(in[0], 0, ids_like(in[0], 9, {14}, 52))),
                   flat(index_select(t(in[0]), 1, ids_like(in[0], 9, {4}, 53)))});
     }},
    {"gather and scatter_add", {{6, 9}, {6, 20}},
     [](const Inputs& in) {
       const Tensor idx = ids_like(in[0], 9, {6, 20}, 54);
       return cat({flat(gather(in[0], 1, idx)), flat(scatter_add(in[0], 1, idx, in[1]))});
     }},
    {"selection", {{9, 9}, {9, 9}},
     [](const Inputs& in) {
       const Tensor &x = in[0], &y = in[1];
       return where(gt(x, y), x * y, x - y) + masked_fill(x, lt(y, scalar_tensor(0.0, {y.dtype(), y.device()})), 0.5) +
              tril(x, -1);
     }},
    {"views", {{4, 6, 5}},
     [](const Inputs& in) {
       const Tensor& x = in[0];
       const std::vector<Tensor> parts = split(x, 2, 1);
       const Tensor s = stack({parts[0], parts[2] * 2.0}, 0);
       return cat({flat(permute(s, {3, 1, 0, 2})), flat(expand(unsqueeze(select(x, 0, 1), 0), {3, 6, 5})),
                   flat(narrow(transpose(x, 0, 2), 1, 2, 3))});
     }},
    {"dropout", {{33, 65}},
     [](const Inputs& in) {
       Generator gen(5);
       return dropout(in[0], 0.25, true, &gen) * in[0];
     }},
    {"a million elements", {{1000003}}, [](const Inputs& in) { return silu(in[0]) * in[0]; }},
};

void expect_grad_parity(const GradCase& c, DType dtype) {
  const double rtol = dtype == kFloat64 ? 1e-10 : 1e-4, atol = dtype == kFloat64 ? 1e-10 : 1e-5;
  Inputs on_cpu, on_device;
  uint64_t seed = 60;
  for (const Shape& shape : c.shapes) {
    Tensor x = random_normal(shape, dtype, ++seed);
    if (c.positive) x = abs(x) + 0.5;
    Tensor xg = on_gpu(x);
    on_cpu.push_back(x.requires_grad_());
    on_device.push_back(xg.requires_grad_());
  }
  const Tensor y = c.f(on_cpu), yg = c.f(on_device);
  EXPECT_TRUE(matches_cpu(yg, y, rtol, atol)) << c.name << " forward " << dtype_name(dtype);
  const Tensor weights = random_normal(y.shape(), dtype, 99);
  backward(sum(y * weights));
  backward(sum(yg * on_gpu(weights)));
  for (size_t i = 0; i < on_cpu.size(); ++i) {
    ASSERT_TRUE(on_device[i].grad().defined()) << c.name << " input " << i;
    EXPECT_TRUE(matches_cpu(on_device[i].grad(), on_cpu[i].grad(), rtol, atol))
        << c.name << " gradient of input " << i << " " << dtype_name(dtype);
  }
}

TEST(CudaAutograd, ForwardAndGradientsMatchTheCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  const NoTf32 exact;
  for (DType dtype : {kFloat64, kFloat32})
    for (const GradCase& c : kCases) expect_grad_parity(c, dtype);
}

}  // namespace
}  // namespace linea
