// Views: they share storage with their base, and their values follow index formulas that the
// tests below compute by hand from the base's row-major values.
#include <functional>
#include <numeric>

#include "tensor/view.h"
#include "tests/test_util.h"

namespace linea {
namespace {

// Row-major coordinates of every element of `shape`, in order.
std::vector<Shape> coordinates(const Shape& shape) {
  std::vector<Shape> out;
  Shape c(shape.size(), 0);
  for (int64_t flat = 0; flat < numel_of(shape); ++flat) {
    out.push_back(c);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++c[d] < shape[d]) break;
      c[d] = 0;
    }
  }
  return out;
}

int64_t flat_index(const Shape& coord, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + coord[d];
  return flat;
}

// The values a view of `shape` should hold, when element `c` of the view is element
// source(c) of the contiguous tensor `base`.
std::vector<double> expected_values(const Tensor& base, const Shape& shape,
                                    const std::function<Shape(const Shape&)>& source) {
  const std::vector<double> b = base.to_vector<double>();
  std::vector<double> out;
  for (const Shape& c : coordinates(shape)) out.push_back(b[flat_index(source(c), base.shape())]);
  return out;
}

void expect_view_of(const Tensor& v, const Tensor& base, const Shape& shape,
                    const std::function<Shape(const Shape&)>& source) {
  EXPECT_EQ(v.shape(), shape);
  EXPECT_EQ(v.storage(), base.storage()) << "expected a view sharing the base's storage";
  EXPECT_EQ(v.to_vector<double>(), expected_values(base, shape, source));
}

TEST(Views, WritesThroughSliceAndTransposeReachTheBase) {
  Tensor base = randn({4, 5});
  const std::vector<double> before = base.to_vector<double>();

  Tensor cols = slice(base, 1, 1, 4);
  ASSERT_EQ(cols.storage(), base.storage());
  const uint64_t version = base.version();
  fill_(cols, 3.5);
  EXPECT_GT(base.version(), version) << "views share one version counter";
  std::vector<double> after = base.to_vector<double>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(after[i * 5 + j], j >= 1 && j < 4 ? 3.5 : before[i * 5 + j]) << i << "," << j;

  Tensor columns_first = transpose(base, 0, 1);
  const Tensor src = randn({5, 4});
  copy_(columns_first, src);
  after = base.to_vector<double>();
  const std::vector<double> s = src.to_vector<double>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(after[i * 5 + j], s[j * 4 + i]);

  // A broadcast source fills a row through select.
  Tensor row = select(base, 0, 2);
  const Tensor value = randn({});
  copy_(row, value);
  after = base.to_vector<double>();
  for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(after[2 * 5 + j], value.item());
}

TEST(Views, WritingAViewOfAGradLeafNeedsNoGradMode) {
  Tensor x = randn({3, 4}).requires_grad_();
  Tensor row = select(x, 0, 1);
  EXPECT_TRUE(row.requires_grad());
  EXPECT_LINEA_ERROR(fill_(row, 1.0), "fill_", "requires grad");
  {
    NoGradGuard no_grad;
    Tensor r = select(x, 0, 1);
    fill_(r, -2.0);
  }
  const std::vector<double> v = x.to_vector<double>();
  for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(v[4 + j], -2.0);
}

TEST(Views, ViewAndReshapeOfContiguousShareStorage) {
  const Tensor x = randn({2, 3, 4});
  const auto same_order = [&](const Shape& shape) {
    return [shape, &x](const Shape& c) {
      Shape src(3);
      int64_t flat = flat_index(c, shape);
      for (int64_t d = 2; d >= 0; --d) {
        src[d] = flat % x.size(d);
        flat /= x.size(d);
      }
      return src;
    };
  };
  expect_view_of(view(x, {6, 4}), x, {6, 4}, same_order({6, 4}));
  expect_view_of(view(x, {-1, 2}), x, {12, 2}, same_order({12, 2}));
  expect_view_of(view(x, {4, -1}), x, {4, 6}, same_order({4, 6}));
  expect_view_of(reshape(x, {24}), x, {24}, same_order({24}));
  expect_view_of(view(x, {2, 1, 12}), x, {2, 1, 12}, same_order({2, 1, 12}));
}

TEST(Views, IncompatibleStridesMakeViewFailAndReshapeCopy) {
  const Tensor x = randn({2, 3, 4});
  const Tensor xt = transpose(x, 0, 2);  // (4, 3, 2), strides (1, 4, 12)
  EXPECT_LINEA_ERROR(view(xt, {24}), "view", "reshape()");
  const Tensor flat = reshape(xt, {24});
  EXPECT_NE(flat.storage(), x.storage());
  const std::vector<double> v = x.to_vector<double>(), f = flat.to_vector<double>();
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 2; ++k) EXPECT_EQ(f[(i * 3 + j) * 2 + k], v[(k * 3 + j) * 4 + i]);

  // Splitting one dim of a non-contiguous tensor is still a view.
  const Tensor xs = transpose(x, 1, 2);  // (2, 4, 3)
  expect_view_of(view(xs, {2, 2, 2, 3}), x, {2, 2, 2, 3},
                 [](const Shape& c) { return Shape{c[0], c[3], c[1] * 2 + c[2]}; });
  EXPECT_LINEA_ERROR(view(xs, {2, 12}), "view");
}

TEST(Views, PermuteAndTranspose) {
  const Tensor x = randn({2, 3, 4});
  const Tensor p = permute(x, {2, 0, 1});
  expect_view_of(p, x, {4, 2, 3}, [](const Shape& c) { return Shape{c[1], c[2], c[0]}; });
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  expect_view_of(transpose(x, -1, 0), x, {4, 3, 2}, [](const Shape& c) { return Shape{c[2], c[1], c[0]}; });
  const Tensor m = randn({3, 5});
  expect_view_of(t(m), m, {5, 3}, [](const Shape& c) { return Shape{c[1], c[0]}; });
  EXPECT_FALSE(t(m).is_contiguous());
  // A 0-dim tensor accepts dim 0 (or -1) and is its own transpose.
  const Tensor s = randn({});
  expect_view_of(transpose(s, 0, -1), s, {}, [](const Shape& c) { return c; });
  expect_view_of(permute(s, {}), s, {}, [](const Shape& c) { return c; });
}

TEST(Views, NarrowAndSelect) {
  const Tensor x = randn({3, 6});
  expect_view_of(narrow(x, 1, 2, 3), x, {3, 3}, [](const Shape& c) { return Shape{c[0], c[1] + 2}; });
  expect_view_of(narrow(x, 1, -2, 2), x, {3, 2}, [](const Shape& c) { return Shape{c[0], c[1] + 4}; });
  expect_view_of(narrow(x, 0, 1, 0), x, {0, 6}, [](const Shape& c) { return c; });
  expect_view_of(select(x, 1, -1), x, {3}, [](const Shape& c) { return Shape{c[0], 5}; });
  expect_view_of(select(x, 0, 2), x, {6}, [](const Shape& c) { return Shape{2, c[0]}; });
}

TEST(Views, SliceWithStepAndNegativeBounds) {
  const Tensor x = randn({3, 10});
  struct Case {
    int64_t start, end, step;
    std::vector<int64_t> columns;  // what Python's x[:, start:end:step] picks
  };
  const std::vector<Case> cases = {
      {0, 10, 3, {0, 3, 6, 9}}, {-7, -1, 2, {3, 5, 7}}, {2, 100, 4, {2, 6}}, {-100, 5, 2, {0, 2, 4}},
      {8, 3, 1, {}},            {-3, 10, 1, {7, 8, 9}}, {9, 10, 5, {9}},    {0, -11, 1, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.start << ":" << c.end << ":" << c.step);
    const Tensor s = slice(x, 1, c.start, c.end, c.step);
    expect_view_of(s, x, {3, static_cast<int64_t>(c.columns.size())},
                   [&](const Shape& at) { return Shape{at[0], c.columns[at[1]]}; });
  }
  // Along dim 0 with a negative dim.
  expect_view_of(slice(x, -2, 1, 3, 1), x, {2, 10}, [](const Shape& c) { return Shape{c[0] + 1, c[1]}; });
}

TEST(Views, ExpandUsesStrideZero) {
  const Tensor row = randn({1, 3});
  const Tensor e = expand(row, {4, 3});
  EXPECT_EQ(e.strides()[0], 0);
  expect_view_of(e, row, {4, 3}, [](const Shape& c) { return Shape{0, c[1]}; });
  const Tensor e3 = expand(row, {2, -1, 3});
  EXPECT_EQ(e3.strides()[0], 0);
  expect_view_of(e3, row, {2, 1, 3}, [](const Shape& c) { return Shape{0, c[2]}; });
  const Tensor col = randn({3, 1});
  expect_view_of(expand(col, {3, 5}), col, {3, 5}, [](const Shape& c) { return Shape{c[0], 0}; });
  EXPECT_LINEA_ERROR(expand(col, {4, 5}), "expand", "[3, 1]", "[4, 5]");
}

TEST(Views, SqueezeAndUnsqueeze) {
  const Tensor x = randn({2, 1, 3, 1});
  const auto drop_ones = [](const Shape& c) { return Shape{c[0], 0, c[1], 0}; };
  expect_view_of(squeeze(x), x, {2, 3}, drop_ones);
  expect_view_of(squeeze(x, 1), x, {2, 3, 1}, [](const Shape& c) { return Shape{c[0], 0, c[1], c[2]}; });
  expect_view_of(squeeze(x, -1), x, {2, 1, 3}, [](const Shape& c) { return Shape{c[0], c[1], c[2], 0}; });
  expect_view_of(squeeze(x, 0), x, {2, 1, 3, 1}, [](const Shape& c) { return c; });  // size 2: kept
  expect_view_of(unsqueeze(x, 0), x, {1, 2, 1, 3, 1}, [](const Shape& c) { return Shape{c[1], c[2], c[3], c[4]}; });
  expect_view_of(unsqueeze(x, -1), x, {2, 1, 3, 1, 1}, [](const Shape& c) { return Shape{c[0], c[1], c[2], c[3]}; });
  expect_view_of(unsqueeze(x, 2), x, {2, 1, 1, 3, 1}, [](const Shape& c) { return Shape{c[0], c[1], c[3], c[4]}; });
  const Tensor s = randn({});
  expect_view_of(unsqueeze(s, 0), s, {1}, [](const Shape&) { return Shape{}; });
  expect_view_of(squeeze(unsqueeze(s, 0)), s, {}, [](const Shape&) { return Shape{}; });
}

TEST(Views, Flatten) {
  const Tensor x = randn({2, 3, 4, 5});
  const auto unflatten = [](const Shape& c) {
    return Shape{c[0] / 60, c[0] / 20 % 3, c[0] / 5 % 4, c[0] % 5};
  };
  expect_view_of(flatten(x), x, {120}, unflatten);
  expect_view_of(flatten(x, 1, 2), x, {2, 12, 5}, [](const Shape& c) { return Shape{c[0], c[1] / 4, c[1] % 4, c[2]}; });
  const Tensor s = randn({});
  EXPECT_EQ(flatten(s).shape(), Shape{1});
  // A permuted tensor flattens into a copy in the permuted order.
  const Tensor p = permute(x, {3, 2, 1, 0});
  const Tensor f = flatten(p);
  EXPECT_NE(f.storage(), x.storage());
  EXPECT_EQ(f.to_vector<double>(), expected_values(x, {120}, [](const Shape& c) {
              const int64_t i = c[0];
              return Shape{i % 2, i / 2 % 3, i / 6 % 4, i / 24};
            }));
}

TEST(Views, ContiguousCopiesOnlyWhenNeeded) {
  const Tensor x = randn({3, 4});
  EXPECT_TRUE(contiguous(x).is_same(x));
  const Tensor xt = t(x);
  const Tensor c = contiguous(xt);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.storage(), x.storage());
  EXPECT_EQ(c.to_vector<double>(), xt.to_vector<double>());
  EXPECT_EQ(c.to_vector<double>(), expected_values(x, {4, 3}, [](const Shape& c) { return Shape{c[1], c[0]}; }));
  // A slice with a step is not contiguous; a leading size-1 dim with any stride is.
  EXPECT_FALSE(slice(x, 1, 0, 4, 2).is_contiguous());
  EXPECT_TRUE(slice(x, 0, 1, 2).is_contiguous());
}

TEST(Views, CatAlongEachDim) {
  const std::vector<Tensor> xs = {randn({2, 3, 4}), randn({2, 1, 4}), randn({2, 5, 4})};
  const Tensor y = cat(xs, 1);
  ASSERT_EQ(y.shape(), (Shape{2, 9, 4}));
  const std::vector<double> got = y.to_vector<double>();
  std::vector<std::vector<double>> parts;
  for (const Tensor& x : xs) parts.push_back(x.to_vector<double>());
  for (int64_t i = 0; i < 2; ++i) {
    int64_t at = 0;
    for (size_t p = 0; p < xs.size(); ++p) {
      const int64_t n = xs[p].size(1);
      for (int64_t j = 0; j < n; ++j)
        for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(got[(i * 9 + at + j) * 4 + k], parts[p][(i * n + j) * 4 + k]);
      at += n;
    }
  }
  // Along the first and the last dim, the layout reduces to concatenating flat blocks.
  const Tensor a = randn({2, 3}), b = randn({4, 3});
  std::vector<double> expect = a.to_vector<double>();
  for (double v : b.to_vector<double>()) expect.push_back(v);
  EXPECT_EQ(cat({a, b}, 0).to_vector<double>(), expect);
  const Tensor c = randn({2, 2});
  const std::vector<double> av = a.to_vector<double>(), cv = c.to_vector<double>();
  const std::vector<double> last = cat({a, c}, -1).to_vector<double>();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(last[i * 5 + j], j < 3 ? av[i * 3 + j] : cv[i * 2 + j - 3]);
}

TEST(Views, StackInsertsANewDim) {
  const std::vector<Tensor> xs = {randn({2, 3}), randn({2, 3}), randn({2, 3})};
  std::vector<std::vector<double>> parts;
  for (const Tensor& x : xs) parts.push_back(x.to_vector<double>());
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(dim);
    const Tensor y = stack(xs, dim);
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Shape shape = {2, 3};
    shape.insert(shape.begin() + d, 3);
    ASSERT_EQ(y.shape(), shape);
    const std::vector<double> got = y.to_vector<double>();
    for (const Shape& c : coordinates(shape)) {
      Shape inner = c;
      const int64_t which = c[d];
      inner.erase(inner.begin() + d);
      EXPECT_EQ(got[flat_index(c, shape)], parts[which][inner[0] * 3 + inner[1]]);
    }
  }
}

TEST(Views, SplitAndChunkAreViewsOfConsecutiveRanges) {
  const Tensor x = randn({3, 7});
  const auto check_pieces = [&](const std::vector<Tensor>& pieces, const std::vector<int64_t>& sizes) {
    ASSERT_EQ(pieces.size(), sizes.size());
    int64_t at = 0;
    for (size_t p = 0; p < pieces.size(); ++p) {
      expect_view_of(pieces[p], x, {3, sizes[p]}, [at](const Shape& c) { return Shape{c[0], c[1] + at}; });
      at += sizes[p];
    }
  };
  check_pieces(split(x, 2, 1), {2, 2, 2, 1});
  check_pieces(split(x, std::vector<int64_t>{1, 4, 2}, 1), {1, 4, 2});
  check_pieces(split(x, std::vector<int64_t>{0, 7}, -1), {0, 7});
  check_pieces(chunk(x, 3, 1), {3, 3, 1});
  check_pieces(chunk(x, 7, 1), {1, 1, 1, 1, 1, 1, 1});
  check_pieces(chunk(x, 2, -1), {4, 3});
  const std::vector<Tensor> rows = chunk(x, 3, 0);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].to_vector<double>(), select(x, 0, 2).to_vector<double>());
}

TEST(Views, EightDimsWorkAndNineAreRefused) {
  const Shape shape8 = {2, 1, 2, 1, 3, 1, 2, 2};
  const Tensor x = randn(shape8);
  EXPECT_EQ(x.dim(), 8);
  const Tensor p = permute(x, {7, 6, 5, 4, 3, 2, 1, 0});
  Shape reversed(shape8.rbegin(), shape8.rend());
  expect_view_of(p, x, reversed, [](const Shape& c) { return Shape(c.rbegin(), c.rend()); });
  const std::vector<double> v = x.to_vector<double>();
  EXPECT_NEAR(sum(p).item(), std::accumulate(v.begin(), v.end(), 0.0), 1e-4);
  EXPECT_EQ(reshape(p, {-1}).numel(), x.numel());

  EXPECT_LINEA_ERROR(empty({1, 1, 1, 1, 1, 1, 1, 1, 1}), "at most 8 dims", "[1, 1, 1, 1, 1, 1, 1, 1, 1]");
  EXPECT_LINEA_ERROR(randn({1, 1, 1, 1, 1, 1, 1, 1, 2}), "at most 8 dims");
  EXPECT_LINEA_ERROR(unsqueeze(x, 0), "at most 8 dims");
  EXPECT_LINEA_ERROR(view(x, {2, 1, 2, 1, 3, 1, 2, 2, 1}), "at most 8 dims");
}

}  // namespace
}  // namespace linea
