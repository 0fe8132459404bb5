// CUDA index kernels against the CPU's: index_select and gather along every dim through strided
// inputs and for every dtype; index_add and scatter_add bit for bit (they add in the CPU's
// order, so repeated targets give the same sums on every run); bad indices raise linea::Error.
#include "tensor/backend.h"
#include "tests/cuda/parity.h"

namespace linea {
namespace {

using testing::gpu;
using testing::on_gpu;
using testing::random_normal;
using testing::same_values;

const DType kFloats[] = {kFloat32, kFloat64};

Tensor random_ids(int64_t high, const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randint(0, high, shape, kCPU, &gen);
}

TEST(CudaIndexing, IndexSelectAlongEveryDimForEveryDtype) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor base = random_normal({11, 7, 5}, kFloat64, 31);
  for (DType dtype : {kFloat32, kFloat64, kInt64, kBool}) {
    const Tensor x = dtype == kBool ? gt(base, scalar_tensor(0.0, kFloat64)) : to(base * 4.0, dtype);
    const Tensor xt = permute(x, {2, 0, 1}), gt_ = permute(on_gpu(x), {2, 0, 1});  // (5, 11, 7), strided
    for (int64_t dim = 0; dim < 3; ++dim) {
      const Tensor index = random_ids(xt.size(dim), {13}, 32 + dim);  // with repeats
      EXPECT_TRUE(same_values(index_select(gt_, dim, on_gpu(index)), index_select(xt, dim, index)))
          << dtype_name(dtype) << " dim " << dim;
    }
  }
}

TEST(CudaIndexing, IndexAddIsBitExactWithRepeatedTargets) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kFloats) {
    // An embedding gradient's shape: many ids, heavily repeated, into a small table.
    const Tensor index = random_ids(50, {1000}, 33);
    const Tensor src = random_normal({1000, 19}, dtype, 34);
    const Tensor out = random_normal({50, 19}, dtype, 35);
    const Tensor out_g = on_gpu(out);
    backend_for(kCPU).index_add(out, 0, index, src);
    backend_for(gpu()).index_add(out_g, 0, on_gpu(index), on_gpu(src));
    EXPECT_TRUE(same_values(out_g, out)) << dtype_name(dtype);
    // Along a middle dim, from a permuted (non-contiguous) source.
    const Tensor index1 = random_ids(10, {25}, 36);
    const Tensor src1 = random_normal({25, 3, 4}, dtype, 37);
    const Tensor out1 = zeros({3, 10, 4}, dtype), out1_g = zeros({3, 10, 4}, {dtype, gpu()});
    backend_for(kCPU).index_add(out1, 1, index1, permute(src1, {1, 0, 2}));
    backend_for(gpu()).index_add(out1_g, 1, on_gpu(index1), permute(on_gpu(src1), {1, 0, 2}));
    EXPECT_TRUE(same_values(out1_g, out1)) << dtype_name(dtype);
  }
}

TEST(CudaIndexing, GatherAndScatterAddAlongEveryDim) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kFloats) {
    const Tensor big = random_normal({6, 9, 8}, dtype, 38);
    const Tensor x = slice(big, 2, 0, 8, 2), xg = slice(on_gpu(big), 2, 0, 8, 2);  // (6, 9, 4), strided
    for (int64_t dim = 0; dim < 3; ++dim) {
      Shape shape{4, 7, 3};  // smaller than x in the other dims, as gather allows
      shape[dim] = 20;       // longer along dim: repeated positions
      const Tensor index = random_ids(x.size(dim), shape, 39 + dim);
      EXPECT_TRUE(same_values(gather(xg, dim, on_gpu(index)), gather(x, dim, index))) << "gather dim " << dim;
      const Tensor src = random_normal(shape, dtype, 40 + dim);
      EXPECT_TRUE(same_values(scatter_add(xg, dim, on_gpu(index), on_gpu(src)), scatter_add(x, dim, index, src)))
          << "scatter_add dim " << dim << " " << dtype_name(dtype);
    }
  }
  // Int64 gathers too (no gradient).
  const Tensor ids = to(random_normal({5, 8}, kFloat64, 41) * 100.0, kInt64);
  const Tensor where = random_ids(8, {5, 3}, 42);
  EXPECT_TRUE(same_values(gather(on_gpu(ids), 1, on_gpu(where)), gather(ids, 1, where)));
}

TEST(CudaIndexing, ScatterAddIntoAHugeTensorUsesTheSortPath) {
  LINEA_SKIP_WITHOUT_CUDA();
  // Few sources into many targets: the sort's keys are 20 bits wide.
  const Tensor x = zeros({1, 1000003}, kFloat32);
  const Tensor index = random_ids(1000003, {1, 300}, 43);
  const Tensor src = random_normal({1, 300}, kFloat32, 44);
  EXPECT_TRUE(same_values(scatter_add(on_gpu(x), 1, on_gpu(index), on_gpu(src)), scatter_add(x, 1, index, src)));
}

TEST(CudaIndexing, BadIndicesRaiseErrorsNamingTheOpAndTheValue) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor x = zeros({11, 4}, {kFloat32, gpu()});
  const Tensor too_big = from_vector<int64_t>({0, 3, 11, 2}, {4}, gpu());
  const Tensor negative = from_vector<int64_t>({-1}, {1}, gpu());
  // Raised at the host's next wait for the device (cuda/deferred_checks.h): the copy to the host.
  EXPECT_LINEA_ERROR(to(index_select(x, 0, too_big), kCPU), "index_select",
                     "index 11 is out of range for a dim of size 11");
  EXPECT_LINEA_ERROR(to(index_select(x, 0, negative), kCPU), "index_select", "index -1 is out of range");
  // (raised after embedding() returned, so by its index_select rather than in embedding's words)
  EXPECT_LINEA_ERROR(to(embedding(x, too_big), kCPU), "index_select", "index 11 is out of range");
  const Tensor g_index = from_vector<int64_t>({0, 1, 2, 4, 0, 0, 0, 0}, {2, 4}, gpu());
  EXPECT_LINEA_ERROR(to(gather(x, 1, g_index), kCPU), "gather", "index 4 is out of range for a dim of size 4");
  // Two bad calls before one wait: the first one's error; both are consumed by it.
  const Tensor first = gather(x, 1, g_index), second = index_select(x, 0, too_big);
  EXPECT_LINEA_ERROR(cuda::synchronize(0), "gather", "index 4");
  EXPECT_EQ(to(index_select(x, 0, from_vector<int64_t>({10}, {1}, gpu())), kCPU).numel(), 4);
  EXPECT_LINEA_ERROR(to(scatter_add(x, 1, g_index, zeros({2, 4}, {kFloat32, gpu()})), kCPU), "scatter_add",
                     "index 4 is out of range for a dim of size 4");
  // The first bad index in order, as the CPU names it.
  const Tensor out = zeros({11, 4}, {kFloat32, gpu()});
  const Tensor two_bad = from_vector<int64_t>({0, 12, 3, -1, 11}, {5}, gpu());
  EXPECT_LINEA_ERROR((backend_for(gpu()).index_add(out, 0, two_bad, ones({5, 4}, {kFloat32, gpu()})),
                      cuda::synchronize(0)),
                     "index_add", "index 12 is out of range for a dim of size 11");
  // The device is fine afterwards, and nothing was written (not even the good indices' rows).
  EXPECT_EQ(sum(out).item(), 0.0);
  EXPECT_EQ(index_select(x, 0, from_vector<int64_t>({10}, {1}, gpu())).numel(), 4);
}

TEST(CudaIndexing, EmbeddingGradientsMatchTheCpuExactly) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor w = random_normal({37, 16}, kFloat32, 45);
  const Tensor ids = random_ids(37, {8, 129}, 46);
  Tensor wc = clone(w), wg = on_gpu(w);
  wc.requires_grad_();
  wg.requires_grad_();
  const Tensor weights = random_normal({8, 129, 16}, kFloat32, 47);
  backward(sum(embedding(wc, ids) * weights));
  backward(sum(embedding(wg, on_gpu(ids)) * on_gpu(weights)));
  EXPECT_TRUE(same_values(wg.grad(), wc.grad()));
}

}  // namespace
}  // namespace linea
