// Bad input is a linea::Error whose message names the op and what was wrong with the inputs:
// never an abort, a crash or a silent NaN. The suite also runs under ASan/UBSan, so a check
// that reads out of bounds before it throws shows up here.
#include "cuda/memory.h"
#include "tests/test_util.h"

namespace linea {
namespace {

Tensor ids(std::initializer_list<double> values, const Shape& shape = {}) { return tensor(values, shape, kInt64); }

TEST(Errors, BroadcastingAndMatmulShapes) {
  EXPECT_LINEA_ERROR(add(randn({2, 3}), randn({4})), "linea.add", "[2, 3]", "[4]", "broadcast");
  EXPECT_LINEA_ERROR(randn({5, 1, 3}) * randn({2, 4, 3}), "linea.mul", "[5, 1, 3]", "[2, 4, 3]");
  EXPECT_LINEA_ERROR(where(tensor({1, 0}, {}, kBool), randn({3}), randn({3})), "linea.where", "[2]", "[3]");
  EXPECT_LINEA_ERROR(matmul(randn({2, 3}), randn({4, 5})), "linea.matmul", "inner", "float32[2, 3]", "float32[4, 5]");
  EXPECT_LINEA_ERROR(matmul(randn({7}), randn({6})), "linea.matmul", "[1, 7]", "[6, 1]");
  EXPECT_LINEA_ERROR(matmul(randn({2, 2, 3}), randn({3, 3, 4})), "linea.matmul", "[2]", "[3]");
  EXPECT_LINEA_ERROR(matmul(randn({}), randn({3})), "linea.matmul", "float32[]", "float32[3]");
  Tensor acc = randn({3});
  EXPECT_LINEA_ERROR(add_(acc, randn({2, 3})), "linea.add_", "[2, 3]", "[3]");
}

TEST(Errors, DTypes) {
  EXPECT_LINEA_ERROR(add(randn({2}), randn({2}, kFloat64)), "linea.add", "float32[2]", "float64[2]");
  EXPECT_LINEA_ERROR(exp(arange(3)), "linea.exp", "int64[3]");
  EXPECT_LINEA_ERROR(matmul(arange(4), arange(4)), "linea.matmul", "int64[4]");
  EXPECT_LINEA_ERROR(sum(tril_mask(2, 2)), "linea.sum", "bool[2, 2]");
  EXPECT_LINEA_ERROR(where(randn({3}), randn({3}), randn({3})), "linea.where", "bool", "float32[3]");
  EXPECT_LINEA_ERROR(masked_fill(randn({2, 3}), ids({1, 0, 1}), 0.0), "linea.masked_fill", "bool", "int64[3]");
  EXPECT_LINEA_ERROR(index_select(randn({4}), 0, tensor({0, 1})), "linea.index_select", "int64", "float32[2]");
  EXPECT_LINEA_ERROR(randn({2}, kInt64), "linea.randn", "int64");
  Tensor counts = arange(3);
  EXPECT_LINEA_ERROR(counts.requires_grad_(), "requires_grad_", "floating", "int64[3]");
}

TEST(Errors, DimsOutOfRange) {
  const Tensor x = randn({2, 3});
  EXPECT_LINEA_ERROR(sum(x, {2}), "linea.sum", "dim 2", "2 dims");
  EXPECT_LINEA_ERROR(sum(x, {0, -2}), "linea.sum", "twice");
  EXPECT_LINEA_ERROR(softmax(x, -3), "linea.softmax", "dim -3", "2 dims");
  EXPECT_LINEA_ERROR(log_softmax(x, 2), "linea.log_softmax", "dim 2");
  EXPECT_LINEA_ERROR(transpose(x, 0, 5), "linea.transpose", "dim 5", "2 dims");
  EXPECT_LINEA_ERROR(permute(x, {1, 1}), "linea.permute", "repeats");
  EXPECT_LINEA_ERROR(permute(x, {0}), "linea.permute", "float32[2, 3]");
  EXPECT_LINEA_ERROR(argmax(x, 3), "linea.argmax", "dim 3");
  EXPECT_LINEA_ERROR(cumsum(x, -4), "linea.cumsum", "dim -4");
  EXPECT_LINEA_ERROR(previous_minus(x, 1, zeros({2, 3})), "linea.previous_minus", "before must be [2, 1]");
  EXPECT_LINEA_ERROR(previous_minus(x, 3), "linea.previous_minus", "dim 3");
  // A 0-dim tensor has no dim to select from or to index along.
  EXPECT_LINEA_ERROR(select(randn({}), 0, 0), "select", "0-dim");
  EXPECT_LINEA_ERROR(narrow(randn({}), 0, 0, 1), "narrow", "0-dim");
  EXPECT_LINEA_ERROR(split(randn({}), 1), "split", "0-dim");
  EXPECT_LINEA_ERROR(gather(randn({}), 0, ids({0}, {})), "gather", "0-dim");
  EXPECT_LINEA_ERROR(randn({}).size(0), "size", "0-dim");
}

TEST(Errors, IndicesOutOfRange) {
  EXPECT_LINEA_ERROR(index_select(randn({4, 3}), 0, ids({0, 4})), "linea.index_select", "index 4", "size 4");
  EXPECT_LINEA_ERROR(index_select(randn({4, 3}), 1, ids({-1}, {1})), "linea.index_select", "index -1", "size 3");
  EXPECT_LINEA_ERROR(gather(randn({2, 3}), 1, ids({0, 3, 1, 2}, {2, 2})), "linea.gather", "index 3", "size 3");
  EXPECT_LINEA_ERROR(scatter_add(randn({2, 3}), 0, ids({2}, {1, 1}), randn({1, 1})), "linea.scatter_add", "index 2");
  EXPECT_LINEA_ERROR(embedding(randn({10, 4}), ids({1, 10, 2}, {3})), "linea.embedding", "index 10", "float32[10, 4]");
  EXPECT_LINEA_ERROR(cross_entropy(randn({3, 5}), ids({0, 5, 1})), "linea.cross_entropy", "target 5", "5 classes");
  EXPECT_LINEA_ERROR(cross_entropy(randn({3, 5}), ids({0, -2, 1})), "linea.cross_entropy", "target -2");
  EXPECT_LINEA_ERROR(select(randn({2, 3}), 1, 3), "linea.select", "index 3", "float32[2, 3]");
}

TEST(Errors, IndexShapes) {
  EXPECT_LINEA_ERROR(gather(randn({2, 3}), 1, ids({0, 1})), "linea.gather", "int64[2]", "float32[2, 3]");
  EXPECT_LINEA_ERROR(gather(randn({2, 3}), 1, ids({0, 0, 0, 0, 0, 0}, {3, 2})), "linea.gather", "larger");
  EXPECT_LINEA_ERROR(index_select(randn({4, 3}), 0, ids({0, 1}, {1, 2})), "linea.index_select", "1-D", "int64[1, 2]");
  EXPECT_LINEA_ERROR(scatter_add(randn({2, 3}), 1, ids({0, 1}, {1, 2}), randn({2, 1})), "linea.scatter_add",
                     "int64[1, 2]", "float32[2, 1]");
  EXPECT_LINEA_ERROR(embedding(randn({10}), ids({1})), "linea.embedding", "float32[10]");
}

TEST(Errors, ViewsAndShapes) {
  const Tensor x = randn({2, 3});
  EXPECT_LINEA_ERROR(view(x, {4, 2}), "linea.view", "[4, 2]", "6 elements");
  EXPECT_LINEA_ERROR(reshape(x, {-1, 4}), "linea.reshape", "[-1, 4]", "6 elements");
  EXPECT_LINEA_ERROR(view(x, {-1, -1}), "linea.view", "only one", "[-1, -1]");
  EXPECT_LINEA_ERROR(view(x, {-2, -3}), "linea.view", "[-2, -3]");
  EXPECT_LINEA_ERROR(empty({2, -3}), "linea.empty", "non-negative", "[2, -3]");
  EXPECT_LINEA_ERROR(zeros({2, 3, 4, 5, 6, 7, 8, 9, 10}), "at most 8 dims", "[2, 3, 4, 5, 6, 7, 8, 9, 10]");
  // A numel that overflows int64 is refused before any size is computed from it.
  const int64_t huge = int64_t{1} << 40;
  EXPECT_LINEA_ERROR(empty({huge, huge}), "linea.empty", "[1099511627776, 1099511627776]");
  // Fewer elements, but too many bytes: the byte count must not wrap around to a small number.
  EXPECT_LINEA_ERROR(zeros({int64_t{1} << 62}, kFloat64), "linea.empty", "[4611686018427387904]", "float64");
  EXPECT_LINEA_ERROR(expand(x, {4, 3}), "linea.expand", "float32[2, 3]", "[4, 3]");
  EXPECT_LINEA_ERROR(expand(x, {3}), "linea.expand", "fewer dims");
  EXPECT_LINEA_ERROR(slice(x, 1, 0, 3, 0), "linea.slice", "step", "0");
  EXPECT_LINEA_ERROR(slice(x, 1, 0, 3, -1), "linea.slice", "step", "-1");
  EXPECT_LINEA_ERROR(narrow(x, 1, 2, 2), "linea.narrow", "[2, 4)", "float32[2, 3]");
  EXPECT_LINEA_ERROR(narrow(x, 0, 0, -1), "linea.narrow", "float32[2, 3]");
  EXPECT_LINEA_ERROR(t(randn({2, 3, 4})), "linea.t", "float32[2, 3, 4]");
  EXPECT_LINEA_ERROR(flatten(randn({2, 3, 4}), 2, 1), "linea.flatten", "start_dim 2", "end_dim 1");
  EXPECT_LINEA_ERROR(from_vector(std::vector<float>{1, 2, 3}, {2, 2}), "linea.from_vector", "3 values", "[2, 2]");
}

TEST(Errors, ConcatenationAndSplitting) {
  EXPECT_LINEA_ERROR(cat({randn({2, 3}), randn({3, 4})}, 0), "linea.cat", "float32[2, 3]", "float32[3, 4]");
  EXPECT_LINEA_ERROR(cat({randn({2, 3}), randn({2, 3, 1})}, 0), "linea.cat", "rank", "float32[2, 3, 1]");
  EXPECT_LINEA_ERROR(cat({randn({2}), randn({2}, kFloat64)}), "linea.cat", "float32[2]", "float64[2]");
  EXPECT_LINEA_ERROR(cat({}), "linea.cat", "at least one");
  EXPECT_LINEA_ERROR(cat({randn({}), randn({})}), "linea.cat", "0-dim");
  EXPECT_LINEA_ERROR(stack({randn({2, 3}), randn({3, 2})}), "linea.stack", "float32[2, 3]", "float32[3, 2]");
  EXPECT_LINEA_ERROR(stack({randn({2}), randn({2})}, 2), "linea.stack", "dim 2");
  EXPECT_LINEA_ERROR(split(randn({5, 2}), std::vector<int64_t>{2, 2}, 0), "linea.split", "sum to 4", "float32[5, 2]");
  EXPECT_LINEA_ERROR(split(randn({5, 2}), std::vector<int64_t>{6, -1}, 0), "linea.split", "negative");
  EXPECT_LINEA_ERROR(split(randn({5, 2}), 0, 0), "linea.split", "split_size");
  EXPECT_LINEA_ERROR(chunk(randn({5, 2}), 0, 0), "linea.chunk", "chunks");
}

TEST(Errors, NormsAndLosses) {
  const Tensor x = randn({2, 4});
  EXPECT_LINEA_ERROR(layer_norm(x, randn({3}), Tensor()), "linea.layer_norm", "weight", "[4]", "float32[3]");
  EXPECT_LINEA_ERROR(layer_norm(x, randn({4}), randn({4, 1})), "linea.layer_norm", "bias", "float32[4, 1]");
  EXPECT_LINEA_ERROR(layer_norm(x, randn({4}, kFloat64), Tensor()), "linea.layer_norm", "float64[4]");
  EXPECT_LINEA_ERROR(rms_norm(x, randn({5})), "linea.rms_norm", "weight", "float32[5]");
  EXPECT_LINEA_ERROR(layer_norm(randn({}), Tensor(), Tensor()), "linea.layer_norm", "float32[]");
  EXPECT_LINEA_ERROR(cross_entropy(randn({3, 5}), ids({0, 1, 2, 3, 4})), "linea.cross_entropy", "int64[5]", "[3]");
  EXPECT_LINEA_ERROR(cross_entropy(randn({3, 5}), tensor({0, 1, 2})), "linea.cross_entropy", "int64", "float32[3]");
  EXPECT_LINEA_ERROR(cross_entropy(randn({3, 0}), ids({0, 0, 0})), "linea.cross_entropy", "no classes");
}

TEST(Errors, LinearAttentionMaps) {
  using enum NormalizedExpMode;
  const Tensor x = randn({2, 3, 4, 5});
  EXPECT_LINEA_ERROR(normalized_exp(randn({2, 3, 4}), RowMax), "linea.normalized_exp", "(B, H, T, d)",
                     "float32[2, 3, 4]");
  EXPECT_LINEA_ERROR(normalized_exp(randn({2, 3, 4, 0}), PrefixMax), "linea.normalized_exp", "at least one feature",
                     "float32[2, 3, 4, 0]");
  EXPECT_LINEA_ERROR(normalized_exp(reshape(arange(120), {2, 3, 4, 5}), RowMax), "linea.normalized_exp", "int64");
  EXPECT_LINEA_ERROR(normalized_exp(x, RowMax, std::nan("")), "linea.normalized_exp", "scale", "nan");
  EXPECT_LINEA_ERROR(normalized_exp(x, RowMax, 1.0, randn({2, 3, 1, 1})), "linea.normalized_exp", "PrefixMax only",
                     "float32[2, 3, 1, 1]");
  EXPECT_LINEA_ERROR(normalized_exp(x, PrefixMax, 1.0, randn({2, 3, 1, 2})), "linea.normalized_exp",
                     "(B, H, 1, 1) = (2, 3, 1, 1)", "float32[2, 3, 4, 5]", "float32[2, 3, 1, 2]");
  EXPECT_LINEA_ERROR(normalized_exp(x, PrefixMax, 1.0, randn({2, 3, 1, 1}, kFloat64)), "linea.normalized_exp",
                     "float32[2, 3, 4, 5]", "float64[2, 3, 1, 1]");
  EXPECT_LINEA_ERROR(normalized_exp(Tensor(), RowMax), "linea.normalized_exp", "undefined");

  EXPECT_LINEA_ERROR(refined_log_gate(randn({2, 3}), randn({3, 2}), -20.0), "linea.refined_log_gate",
                     "float32[2, 3]", "float32[3, 2]");
  EXPECT_LINEA_ERROR(refined_log_gate(randn({2, 3}), randn({2, 3}, kFloat64), -20.0), "linea.refined_log_gate",
                     "float32[2, 3]", "float64[2, 3]");
  EXPECT_LINEA_ERROR(refined_log_gate(randn({2, 3}), randn({2, 3}), std::nan("")), "linea.refined_log_gate", "floor",
                     "nan");
  EXPECT_LINEA_ERROR(refined_log_gate(randn({2}), randn({2}), INFINITY), "linea.refined_log_gate", "floor", "inf");
  EXPECT_LINEA_ERROR(refined_log_gate(arange(3), arange(3), -20.0), "linea.refined_log_gate", "int64[3]");
  EXPECT_LINEA_ERROR(refined_log_gate(randn({2}), Tensor(), -20.0), "linea.refined_log_gate", "undefined");
  EXPECT_LINEA_ERROR(refined_log_gate(randn({2, 3}), randn({2, 3}), -20.0, randn({2})), "linea.refined_log_gate",
                     "bias_a", "float32[2]");
  EXPECT_LINEA_ERROR(refined_log_gate(randn({2, 3}), randn({2, 3}), -20.0, Tensor(), randn({1, 2, 3})),
                     "linea.refined_log_gate", "bias_c", "broadcast");
}

TEST(Errors, ScalarParameters) {
  const Tensor x = randn({4});
  EXPECT_LINEA_ERROR(dropout(x, 1.5), "linea.dropout", "[0, 1]", "1.5");
  EXPECT_LINEA_ERROR(dropout(x, -0.25), "linea.dropout", "-0.25");
  EXPECT_LINEA_ERROR(dropout(x, std::nan("")), "linea.dropout", "nan");
  EXPECT_LINEA_ERROR(clamp(x, 2.0, 1.0), "linea.clamp", "min 2", "max 1");
  EXPECT_LINEA_ERROR(arange(0, 5, 0), "linea.arange", "step");
  EXPECT_LINEA_ERROR(uniform({3}, 1.0, -1.0), "linea.uniform", "low 1", "high -1");
  EXPECT_LINEA_ERROR(randint(3, 3, {2}), "linea.randint", "[3, 3)");
  EXPECT_LINEA_ERROR(tril_mask(-1, 3), "linea.tril_mask", "-1x3");
}

TEST(Errors, Devices) {
  if (cuda::is_available()) GTEST_SKIP() << "checks the errors of a machine without a usable GPU";
#ifdef LINEA_WITH_CUDA
  const char* why = "no CUDA device is visible";  // built with CUDA, run without a GPU
#else
  const char* why = "without CUDA";
#endif
  const Tensor x = randn({2, 3});
  EXPECT_LINEA_ERROR(to(x, Device::cuda()), "linea.to", "float32[2, 3]", "cuda:0", why);
  EXPECT_LINEA_ERROR(zeros({2}, Device::cuda(1)), "CUDA");
  EXPECT_LINEA_ERROR(Device::parse("gpu"), "linea.device", "'gpu'");
  EXPECT_LINEA_ERROR(Device::parse("cuda:"), "linea.device", "'cuda:'");
  EXPECT_LINEA_ERROR(Device::parse("cuda:-1"), "linea.device", "'cuda:-1'");
  EXPECT_LINEA_ERROR(Device::parse("cuda:99999999999"), "linea.device", "'cuda:99999999999'");
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
}

TEST(Errors, ItemNeedsOneElement) {
  EXPECT_LINEA_ERROR(randn({2}).item(), "linea.item", "float32[2]");
  EXPECT_LINEA_ERROR(randn({0}).item(), "linea.item", "float32[0]");
}

TEST(Errors, Autograd) {
  EXPECT_LINEA_ERROR(backward(sum(randn({3}))), "linea.backward", "does not require grad", "float32[]");
  Tensor w = randn({3}).requires_grad_();
  EXPECT_LINEA_ERROR(backward(w * 2.0), "linea.backward", "non-scalar", "float32[3]");
  EXPECT_LINEA_ERROR(backward(sum(w), randn({2})), "linea.backward", "float32[2]", "float32[]");
  EXPECT_LINEA_ERROR(w.set_grad(randn({4})), "linea.set_grad", "float32[4]", "float32[3]");
  Tensor y = w * 2.0;
  EXPECT_LINEA_ERROR(y.requires_grad_(), "linea.requires_grad_", "leaf");
  EXPECT_LINEA_ERROR(mul_(w, 0.5), "linea.mul_", "float32[3]", "requires grad");
}

TEST(Errors, UndefinedTensors) {
  const Tensor none;
  const Tensor x = randn({3});
  EXPECT_LINEA_ERROR(exp(none), "linea.exp", "undefined");
  EXPECT_LINEA_ERROR(add(x, none), "linea.add", "undefined");
  EXPECT_LINEA_ERROR(matmul(none, x), "linea.matmul", "undefined");
  EXPECT_LINEA_ERROR(sum(none), "linea.sum", "undefined");
  EXPECT_LINEA_ERROR(view(none, {3}), "linea.view", "undefined");
  EXPECT_LINEA_ERROR(cat({x, none}), "linea.cat", "undefined");
  EXPECT_LINEA_ERROR(where(none, x, x), "linea.where", "undefined");
  EXPECT_LINEA_ERROR(embedding(x, none), "linea.embedding", "undefined");
  EXPECT_LINEA_ERROR(backward(none), "linea.backward", "undefined");
  EXPECT_LINEA_ERROR(none.shape(), "undefined");
  EXPECT_LINEA_ERROR(none.item(), "undefined");
  EXPECT_EQ(none.str(), "tensor(undefined)");
}

}  // namespace
}  // namespace linea
