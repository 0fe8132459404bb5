// Making tensors: fills, ranges, seeded random draws, host round trips, masks and printing.
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "cpu/parallel.h"
#include "tests/test_util.h"

namespace linea {
namespace {

const DType kAllDTypes[] = {kFloat32, kFloat64, kInt64, kBool};

struct Moments {
  double mean, std, min, max;
};

Moments moments(const Tensor& t) {
  const std::vector<double> v = t.to_vector<double>();
  double sum = 0, sq = 0;
  for (double x : v) sum += x;
  const double mean = sum / static_cast<double>(v.size());
  for (double x : v) sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sq / static_cast<double>(v.size() - 1)), *std::min_element(v.begin(), v.end()),
          *std::max_element(v.begin(), v.end())};
}

TEST(Creation, ConstantFillsInEveryDType) {
  for (DType dtype : kAllDTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor z = zeros({2, 3}, dtype), o = ones({4}, dtype), f = full({3, 1}, 2.0, dtype);
    EXPECT_EQ(z.dtype(), dtype);
    EXPECT_EQ(z.shape(), (Shape{2, 3}));
    EXPECT_EQ(z.to_vector<double>(), std::vector<double>(6, 0.0));
    EXPECT_EQ(o.to_vector<double>(), std::vector<double>(4, 1.0));
    EXPECT_EQ(f.to_vector<double>(), std::vector<double>(3, dtype == kBool ? 1.0 : 2.0));
    EXPECT_TRUE(z.is_contiguous());
  }
  EXPECT_EQ(full({2}, -2.75, kFloat64).to_vector<double>(), (std::vector<double>{-2.75, -2.75}));
  EXPECT_EQ(full({}, 7.0).dim(), 0);
  const Tensor like = full_like(randn({2, 2}, kFloat64), 0.5);
  EXPECT_EQ(like.dtype(), kFloat64);
  EXPECT_EQ(like.to_vector<double>(), std::vector<double>(4, 0.5));
  EXPECT_EQ(zeros({0, 3}).numel(), 0);
}

TEST(Creation, ArangeInIntegersAndFloats) {
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), kInt64);
  EXPECT_EQ(arange(2, 11, 3).to_vector<int64_t>(), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(arange(10, 0, -3).to_vector<int64_t>(), (std::vector<int64_t>{10, 7, 4, 1}));
  EXPECT_EQ(arange(3, 3).numel(), 0);
  EXPECT_EQ(arange(3, 1).numel(), 0);  // wrong direction: empty, as in NumPy

  const Tensor quarters = arange(0, 1, 0.25, kFloat32);
  EXPECT_EQ(quarters.dtype(), kFloat32);
  EXPECT_EQ(quarters.to_vector<double>(), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(arange(5, 0, -1.5, kFloat64).to_vector<double>(), (std::vector<double>{5, 3.5, 2, 0.5}));
  const std::vector<double> tenths = arange(-1, 1, 0.1, kFloat64).to_vector<double>();
  ASSERT_EQ(tenths.size(), 20u);
  for (size_t i = 0; i < tenths.size(); ++i) EXPECT_NEAR(tenths[i], -1 + 0.1 * static_cast<double>(i), 1e-12);
}

TEST(Creation, UniformDrawsStayInBounds) {
  const Moments r = moments(rand({100000}));
  EXPECT_GE(r.min, 0.0);
  EXPECT_LT(r.max, 1.0);
  EXPECT_NEAR(r.mean, 0.5, 0.01);
  EXPECT_NEAR(r.std, std::sqrt(1.0 / 12), 0.01);

  for (DType dtype : {kFloat32, kFloat64}) {
    const Moments u = moments(uniform({100000}, -3.0, 2.0, dtype));
    EXPECT_GE(u.min, -3.0);
    EXPECT_LT(u.max, 2.0);
    EXPECT_NEAR(u.mean, -0.5, 0.05);
  }
  // A range one float wide: rounding must not land on the excluded upper bound.
  const double low = 1.0, high = std::nextafter(1.0f, 2.0f);
  const Moments narrow_range = moments(uniform({10000}, low, high, kFloat32));
  EXPECT_GE(narrow_range.min, low);
  EXPECT_LT(narrow_range.max, high);
}

TEST(Creation, NormalDrawsHaveUnitMoments) {
  for (DType dtype : {kFloat32, kFloat64}) {
    const Moments n = moments(randn({100000}, dtype));
    // The standard error of the mean of 1e5 samples is 0.003, of the std about 0.0022.
    EXPECT_NEAR(n.mean, 0.0, 0.015);
    EXPECT_NEAR(n.std, 1.0, 0.015);
    EXPECT_LT(n.min, -3.0);
    EXPECT_GT(n.max, 3.0);
  }
}

TEST(Creation, SeedsMakeDrawsReproducible) {
  Generator a(42), b(42), c(43);
  const std::vector<double> first = randn({1000}, kFloat64, &a).to_vector<double>();
  EXPECT_EQ(first, randn({1000}, kFloat64, &b).to_vector<double>());
  EXPECT_NE(first, randn({1000}, kFloat64, &c).to_vector<double>());
  // The stream moves on: a second draw from a differs from its first.
  EXPECT_NE(first, randn({1000}, kFloat64, &a).to_vector<double>());

  // Resuming at a saved offset gives what the uninterrupted run would have drawn.
  Generator run(9);
  (void)rand({17}, kFloat32, &run);
  const uint64_t saved = run.offset();
  const std::vector<double> next = rand({50}, kFloat32, &run).to_vector<double>();
  Generator resumed(9);
  resumed.set_offset(saved);
  EXPECT_EQ(next, rand({50}, kFloat32, &resumed).to_vector<double>());

  manual_seed(7);
  const std::vector<double> d1 = rand({64}).to_vector<double>();
  manual_seed(7);
  EXPECT_EQ(d1, rand({64}).to_vector<double>());
}

TEST(Creation, DrawsDoNotDependOnTheThreadCount) {
  const int threads = cpu::num_threads();
  const auto draw = [](int n) {
    cpu::set_num_threads(n);
    Generator g(1234);
    std::vector<double> v = randn({100003}, kFloat32, &g).to_vector<double>();
    for (double u : uniform({70001}, -1.0, 1.0, kFloat64, &g).to_vector<double>()) v.push_back(u);
    return v;
  };
  const std::vector<double> one = draw(1), two = draw(2), four = draw(4);
  cpu::set_num_threads(threads);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, four);
}

TEST(Creation, RandintCoversItsRange) {
  const Tensor r = randint(-3, 4, {20000});
  EXPECT_EQ(r.dtype(), kInt64);
  const std::vector<int64_t> v = r.to_vector<int64_t>();
  const std::set<int64_t> seen(v.begin(), v.end());
  EXPECT_EQ(seen, (std::set<int64_t>{-3, -2, -1, 0, 1, 2, 3}));
  Generator a(5), b(5);
  EXPECT_EQ(v.size(), 20000u);
  EXPECT_EQ(randint(0, 1000, {100}, kCPU, &a).to_vector<int64_t>(), randint(0, 1000, {100}, kCPU, &b).to_vector<int64_t>());
}

template <class T>
void expect_round_trip(const std::vector<T>& values, const Shape& shape) {
  const Tensor t = from_vector(values, shape);
  EXPECT_EQ(t.dtype(), dtype_of<T>::value);
  EXPECT_EQ(t.shape(), shape);
  EXPECT_EQ(t.to_vector<T>(), values);
}

TEST(Creation, HostRoundTripsForEveryDType) {
  const std::vector<double> r = randn({6}, kFloat64).to_vector<double>();
  expect_round_trip<double>(r, {2, 3});
  expect_round_trip<float>(std::vector<float>(r.begin(), r.end()), {3, 2});
  expect_round_trip<int64_t>({-5, 0, 7, int64_t{1} << 40, -(int64_t{1} << 50), 3}, {6});
  expect_round_trip<bool>({true, false, false, true}, {2, 2});
  expect_round_trip<double>({2.5}, {});  // one value and no shape: 0-dim
  expect_round_trip<float>({}, {0});
  EXPECT_EQ(from_vector(std::vector<double>{1, 2, 3}).shape(), Shape{3});  // default: 1-D
  // Converting on the way out: float32 values read as double and int64 read as float.
  EXPECT_EQ(from_vector(std::vector<int64_t>{1, -2}).to_vector<float>(), (std::vector<float>{1.f, -2.f}));
  EXPECT_EQ(from_vector(std::vector<float>{0.5f}, {1}).to_vector<double>(), std::vector<double>{0.5});
}

TEST(Creation, TensorFromAnInitializerList) {
  const Tensor a = tensor({1.5, -2.0, 3.25, 0.0}, {2, 2});
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(a.shape(), (Shape{2, 2}));
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{1.5, -2.0, 3.25, 0.0}));
  EXPECT_EQ(tensor({0.1}, {1}, kFloat64).to_vector<double>(), std::vector<double>{0.1});
  EXPECT_EQ(tensor({3, -4}, {}, kInt64).to_vector<int64_t>(), (std::vector<int64_t>{3, -4}));
  EXPECT_EQ(tensor({1, 0, 2}, {}, kBool).to_vector<bool>(), (std::vector<bool>{true, false, true}));
}

TEST(Creation, TriangularMasks) {
  for (int64_t k : {-2, -1, 0, 1, 3}) {
    SCOPED_TRACE(k);
    const Tensor lower = tril_mask(3, 4, k), upper = triu_mask(3, 4, k);
    EXPECT_EQ(lower.dtype(), kBool);
    const std::vector<bool> l = lower.to_vector<bool>(), u = upper.to_vector<bool>();
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        EXPECT_EQ(l[i * 4 + j], j - i <= k) << i << "," << j;
        EXPECT_EQ(u[i * 4 + j], j - i >= k) << i << "," << j;
      }
  }
  // k = 0 is the causal mask: row i sees i + 1 positions.
  const std::vector<bool> causal = tril_mask(4, 4).to_vector<bool>();
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(std::count(causal.begin() + i * 4, causal.begin() + i * 4 + 4, true), i + 1);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Creation, PrintingShowsValuesDTypeAndGrad) {
  std::ostringstream os;
  os << tensor({1.5, -2.25, 3.0}, {3});
  EXPECT_EQ(os.str(), "tensor([ 1.5000, -2.2500,  3.0000], dtype=float32)");

  const std::string ints = tensor({3, -12, 7, 0}, {2, 2}, kInt64).str();
  EXPECT_TRUE(contains(ints, "[[  3, -12],\n")) << ints;
  EXPECT_TRUE(contains(ints, "[  7,   0]]")) << ints;
  EXPECT_TRUE(contains(ints, "dtype=int64")) << ints;
  EXPECT_TRUE(contains(tensor({1, 0}, {}, kBool).str(), "true, false")) << tensor({1, 0}, {}, kBool).str();

  const std::string tiny = tensor({1e-5, 2.0}, {2}, kFloat64).str();
  EXPECT_TRUE(contains(tiny, "1.0000e-05")) << tiny;
  EXPECT_TRUE(contains(tiny, "dtype=float64")) << tiny;

  Tensor w = randn({2});
  EXPECT_FALSE(contains(w.str(), "requires_grad"));
  w.requires_grad_();
  EXPECT_TRUE(contains(w.str(), "requires_grad=true")) << w.str();
  EXPECT_EQ(scalar_tensor(0.25).str(), "tensor(0.2500, dtype=float32)");
}

TEST(Creation, PrintingSummarizesLargeTensors) {
  const Tensor big = arange(0, 5000, 1, kFloat64);
  const std::string s = big.str();
  EXPECT_TRUE(contains(s, "...")) << s;
  EXPECT_LT(s.size(), 200u) << "a summary should not print every element";
  for (const char* edge : {"0.0000", "1.0000", "2.0000", "4997.0000", "4998.0000", "4999.0000"})
    EXPECT_TRUE(contains(s, edge)) << s << " lacks " << edge;
  EXPECT_FALSE(contains(s, "2500.0000")) << s;

  const std::string rows = reshape(arange(0, 2000, 1, kFloat32), {100, 20}).str();
  EXPECT_TRUE(contains(rows, "...")) << rows;
  EXPECT_TRUE(contains(rows, "1999.0000")) << rows;
  EXPECT_FALSE(contains(rows, "1000.0000")) << rows;
  // At or below the threshold every element is printed.
  EXPECT_FALSE(contains(arange(0, 999, 1, kFloat32).str(), "..."));
}

TEST(Creation, ItemReadsTheOneValue) {
  const Tensor r = randn({}, kFloat64);
  EXPECT_EQ(r.item(), r.to_vector<double>()[0]);
  EXPECT_EQ(tensor({-7.5}, {1, 1, 1}).item(), -7.5);
  EXPECT_EQ(tensor({42}, {1}, kInt64).item(), 42.0);
  EXPECT_EQ(tensor({1}, {1}, kBool).item(), 1.0);
  const Tensor x = randn({3, 4});
  EXPECT_EQ(select(select(x, 0, 2), 0, 1).item(), x.to_vector<double>()[2 * 4 + 1]);
}

}  // namespace
}  // namespace linea
