// Forward values of the CPU kernels against naive reference loops written here, on random inputs
// in float32 and float64: elementwise ops with broadcasting and strided operands, reductions over
// many dim sets (large enough for the threaded paths), arg-reductions, cumulative sums, matmul in
// every operand arrangement, and the index kernels.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tensor/backend.h"
#include "tests/test_util.h"

namespace linea {
namespace {

using testing::all_close;

const DType kDtypes[] = {kFloat32, kFloat64};

double rtol_for(DType dtype) { return dtype == kFloat64 ? 1e-12 : 2e-6; }
double atol_for(DType dtype) { return dtype == kFloat64 ? 1e-12 : 1e-5; }

// ---- the reference side: row-major host values and index arithmetic ----

// A tensor's values in row-major order with its shape, read by multi-index.
struct Host {
  Shape shape;
  std::vector<double> v;
  explicit Host(const Tensor& t) : shape(t.shape()), v(t.to_vector<double>()) {}
  Host(Shape s, double fill) : shape(std::move(s)), v(numel_of(shape), fill) {}
  int64_t flat(const Shape& idx) const {
    int64_t f = 0;
    for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
    return f;
  }
  double at(const Shape& idx) const { return v[flat(idx)]; }
  // The element that index `idx` of a broadcast result reads (trailing dims aligned, size 1 repeats).
  double broadcast_at(const Shape& idx) const {
    Shape own(shape.size());
    const size_t lead = idx.size() - shape.size();
    for (size_t d = 0; d < shape.size(); ++d) own[d] = shape[d] == 1 ? 0 : idx[lead + d];
    return at(own);
  }
  Tensor tensor(DType dtype) const { return to(from_vector(v, shape), dtype); }
};

// Calls f(idx) for every multi-index of shape in row-major order.
void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& f) {
  if (numel_of(shape) == 0) return;
  Shape idx(shape.size(), 0);
  while (true) {
    f(idx);
    int64_t d = static_cast<int64_t>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// ---- inputs in several layouts; each has the requested logical shape ----

struct Input {
  std::string layout;
  Tensor t;
};

Tensor reversed_dims(const Tensor& x) {
  std::vector<int64_t> dims(x.dim());
  std::iota(dims.rbegin(), dims.rend(), 0);
  return permute(x, dims);
}

// contiguous, permuted (stored with dims reversed), sliced (every second element of the last
// dim) and, where the first dim can be broadcast, expanded from size 1.
std::vector<Input> layouts(const Shape& shape, DType dtype, Generator& gen) {
  std::vector<Input> out;
  out.push_back({"contiguous", randn(shape, dtype, &gen)});
  if (shape.empty()) return out;
  Shape reversed(shape.rbegin(), shape.rend());
  out.push_back({"permuted", reversed_dims(randn(reversed, dtype, &gen))});
  Shape wide = shape;
  wide.back() = 2 * shape.back() + 1;
  out.push_back({"sliced", slice(randn(wide, dtype, &gen), -1, 1, wide.back(), 2)});
  Shape one = shape;
  one[0] = 1;
  out.push_back({"expanded", expand(randn(one, dtype, &gen), shape)});
  return out;
}

// ---- elementwise ----

struct BinaryRef {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
};

std::vector<BinaryRef> arithmetic() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, [](double a, double b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, [](double a, double b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, [](double a, double b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, [](double a, double b) { return a / b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(abs(a), b); },
       [](double a, double b) { return std::pow(std::abs(a), b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return to(lt(a, b), a.dtype()); },
       [](double a, double b) { return a < b ? 1.0 : 0.0; }},
      {"ge", [](const Tensor& a, const Tensor& b) { return to(ge(a, b), a.dtype()); },
       [](double a, double b) { return a >= b ? 1.0 : 0.0; }},
      {"eq", [](const Tensor& a, const Tensor& b) { return to(eq(a, b), a.dtype()); },
       [](double a, double b) { return a == b ? 1.0 : 0.0; }},
  };
}

// op(a, b) against the reference applied to the broadcast elements, read from the values the
// op actually received (so float32 inputs are compared on their own rounding).
void expect_binary(const BinaryRef& op, const Tensor& a, const Tensor& b) {
  const Tensor out = op.op(a, b);
  const Host ha(a), hb(b);
  Host expected(broadcast_shapes(a.shape(), b.shape(), "test"), 0.0);
  for_each_index(expected.shape, [&](const Shape& idx) {
    expected.v[expected.flat(idx)] = op.ref(ha.broadcast_at(idx), hb.broadcast_at(idx));
  });
  EXPECT_TRUE(all_close(out, expected.tensor(out.dtype()), rtol_for(a.dtype()), atol_for(a.dtype())))
      << op.name << " of " << a.describe() << " strides " << shape_str(a.strides()) << " and " << b.describe()
      << " strides " << shape_str(b.strides());
}

TEST(ElementwiseKernels, BinaryWithBroadcastingAndStridedOperands) {
  const std::pair<Shape, Shape> shapes[] = {{{3, 4}, {3, 4}}, {{2, 3, 4}, {3, 1}}, {{4, 1, 5}, {3, 1}}, {{5}, {}}};
  for (DType dtype : kDtypes)
    for (const auto& [sa, sb] : shapes) {
      Generator gen(1);
      for (const Input& a : layouts(sa, dtype, gen))
        for (const Input& b : layouts(sb, dtype, gen))
          for (const BinaryRef& op : arithmetic()) {
            SCOPED_TRACE(a.layout + " with " + b.layout);
            expect_binary(op, a.t, b.t);
          }
    }
}

TEST(ElementwiseKernels, LargeStridedOperandsTakeTheThreadedPath) {
  for (DType dtype : kDtypes) {
    Generator gen(2);
    const Tensor a = transpose(randn({500, 400}, dtype, &gen), 0, 1);  // (400, 500), column-major
    const Tensor b = randn({500}, dtype, &gen);
    for (const BinaryRef& op : arithmetic()) expect_binary(op, a, b);
    expect_binary(arithmetic()[0], slice(randn({400, 1000}, dtype, &gen), 1, 0, 1000, 2), a);
  }
}

struct UnaryRef {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
};

// Formulas straight from their definitions (not the kernels' stable rearrangements).
std::vector<UnaryRef> unary_refs() {
  const double pi = std::acos(-1.0);
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }},
      {"log", [](const Tensor& x) { return log(abs(x)); }, [](double x) { return std::log(std::abs(x)); }},
      {"sqrt", [](const Tensor& x) { return sqrt(abs(x)); }, [](double x) { return std::sqrt(std::abs(x)); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(abs(x)); }, [](double x) { return 1 / std::sqrt(std::abs(x)); }},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"logsigmoid", [](const Tensor& x) { return logsigmoid(x); },
       [](double x) { return std::log(1 / (1 + std::exp(-x))); }},
      {"softplus", [](const Tensor& x) { return softplus(x); }, [](double x) { return std::log(1 + std::exp(x)); }},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0.0; }},
      {"elu", [](const Tensor& x) { return elu(x, 0.7); },
       [](double x) { return x > 0 ? x : 0.7 * (std::exp(x) - 1); }},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApprox::Tanh); },
       [pi](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * x * x * x))); }},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x / (1 + std::exp(-x)); }},
      {"pow", [](const Tensor& x) { return pow(x, 3.0); }, [](double x) { return x * x * x; }},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.25); },
       [](double x) { return std::min(std::max(x, -0.5), 0.25); }},
      {"square", [](const Tensor& x) { return square(x); }, [](double x) { return x * x; }},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double x) { return 1 / x; }},
      {"log1p", [](const Tensor& x) { return log1p(abs(x)); }, [](double x) { return std::log(1 + std::abs(x)); }},
      {"expm1", [](const Tensor& x) { return expm1(x); }, [](double x) { return std::exp(x) - 1; }},
      {"sign", [](const Tensor& x) { return sign(x); }, [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }},
  };
}

TEST(ElementwiseKernels, UnaryOnStridedInputs) {
  for (DType dtype : kDtypes) {
    Generator gen(3);
    for (const Input& in : layouts({3, 5, 4}, dtype, gen)) {
      const Tensor x = in.t * 2.0;
      const Host hx(x);
      for (const UnaryRef& op : unary_refs()) {
        Host expected(hx.shape, 0.0);
        for (size_t i = 0; i < hx.v.size(); ++i) expected.v[i] = op.ref(hx.v[i]);
        // The reference formulas lose a few ulps of their own (log(1 + e^x), 1 - e^x), so float64
        // is compared to 1e-10 here.
        const double rtol = dtype == kFloat64 ? 1e-10 : 1e-5;
        EXPECT_TRUE(all_close(op.op(x), expected.tensor(dtype), rtol, rtol)) << op.name << " on " << in.layout << " "
                                                                             << dtype_name(dtype);
      }
    }
  }
}

TEST(ElementwiseKernels, WhereAndCopyOnStridedOperands) {
  for (DType dtype : kDtypes) {
    Generator gen(4);
    const Tensor cond = gt(transpose(randn({4, 3}, kFloat64, &gen), 0, 1), zeros({}, kFloat64));  // (3, 4) strided
    const Tensor a = slice(randn({3, 9}, dtype, &gen), 1, 0, 8, 2);
    const Tensor b = randn({4}, dtype, &gen);
    const Tensor out = where(cond, a, b);
    const Host hc(to(cond, kFloat64)), ha(a), hb(b);
    Host expected({3, 4}, 0.0);
    for_each_index(expected.shape, [&](const Shape& idx) {
      expected.v[expected.flat(idx)] = hc.at(idx) != 0 ? ha.at(idx) : hb.broadcast_at(idx);
    });
    EXPECT_TRUE(all_close(out, expected.tensor(dtype), 0, 0));
    // A strided copy across dtypes keeps every value (float32 -> float64 is exact).
    const Tensor as64 = to(reversed_dims(a), kFloat64);
    EXPECT_TRUE(all_close(as64, to(contiguous(reversed_dims(a)), kFloat64), 0, 0));
  }
}

// ---- reductions ----

// Reduces x over dims (normalized, sorted) with `combine`, starting every output at `init`. Walks
// x in row-major order, keeping the output position in step (reduced dims do not move it), so
// the 200000-element cases stay quick.
Host reduce_ref(const Host& x, const std::vector<int64_t>& dims, bool keepdim, double init,
                const std::function<double(double, double)>& combine) {
  Shape kept = x.shape;
  for (int64_t d : dims) kept[d] = 1;
  Host out(kept, init);
  Shape out_step = contiguous_strides(kept);
  for (int64_t d : dims) out_step[d] = 0;
  const int64_t ndim = static_cast<int64_t>(x.shape.size());
  Shape idx(ndim, 0);
  int64_t o = 0;
  for (size_t f = 0; f < x.v.size(); ++f) {
    out.v[o] = combine(out.v[o], x.v[f]);
    for (int64_t d = ndim - 1; d >= 0; --d) {
      o += out_step[d];
      if (++idx[d] < x.shape[d]) break;
      o -= out_step[d] * x.shape[d];
      idx[d] = 0;
    }
  }
  if (!keepdim) {
    Shape dropped;
    for (int64_t d = 0; d < ndim; ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) dropped.push_back(x.shape[d]);
    out.shape = dropped;
  }
  return out;
}

struct ReduceCase {
  Shape shape;
  std::vector<int64_t> dims;  // normalized; empty = all
  bool keepdim;
};

std::vector<int64_t> all_dims(size_t n) {
  std::vector<int64_t> d(n);
  std::iota(d.begin(), d.end(), 0);
  return d;
}

const ReduceCase kReduceCases[] = {
    {{2, 3, 4}, {0}, false},     {{2, 3, 4}, {0, 1}, true},   {{2, 3, 4}, {1}, false},
    {{2, 3, 4}, {2}, true},      {{2, 3, 4}, {0, 2}, false},  {{2, 3, 4}, {}, false},
    {{2, 3, 4, 5}, {1, 2}, false}, {{5}, {0}, true},          {{}, {}, false},
    {{3, 0, 2}, {2}, false},
    // Threaded paths: one long row, column sums over many rows, many short rows.
    {{200000}, {0}, false},      {{400, 500}, {0}, false},    {{500, 400}, {1}, true},
    {{40, 50, 100}, {0, 2}, false},
};

TEST(ReductionKernels, SumMaxMinOverDimSets) {
  struct Op {
    const char* name;
    std::function<Tensor(const Tensor&, const std::vector<int64_t>&, bool)> fn;
    double init;
    std::function<double(double, double)> combine;
  };
  const Op ops[] = {
      {"sum", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return sum(x, d, k); }, 0.0,
       [](double a, double b) { return a + b; }},
      {"amax", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return amax(x, d, k); }, -INFINITY,
       [](double a, double b) { return std::max(a, b); }},
      {"amin", [](const Tensor& x, const std::vector<int64_t>& d, bool k) { return amin(x, d, k); }, INFINITY,
       [](double a, double b) { return std::min(a, b); }},
  };
  for (DType dtype : kDtypes)
    for (const ReduceCase& c : kReduceCases) {
      Generator gen(5);
      for (const Input& in : layouts(c.shape, dtype, gen)) {
        const Host hx(in.t);
        const std::vector<int64_t> dims = c.dims.empty() ? all_dims(c.shape.size()) : c.dims;
        for (const Op& op : ops) {
          const Tensor out = op.fn(in.t, c.dims, c.keepdim);
          const Host expected = reduce_ref(hx, dims, c.keepdim, op.init, op.combine);
          // Float sums accumulate in double, so even float32 sums of 200000 values agree closely.
          EXPECT_TRUE(all_close(out, expected.tensor(dtype), rtol_for(dtype) * 10, atol_for(dtype) * 10))
              << op.name << " of " << in.layout << " " << in.t.describe() << " over " << shape_str(dims)
              << (c.keepdim ? " keepdim" : "");
        }
      }
    }
}

TEST(ReductionKernels, ArgmaxArgminAlongEachDim) {
  for (DType dtype : kDtypes)
    for (const Shape& shape : {Shape{3, 4, 5}, Shape{7}, Shape{300, 400}}) {
      Generator gen(6);
      for (const Input& in : layouts(shape, dtype, gen)) {
        if (in.layout == "expanded") continue;  // ties along dim 0 by construction
        const Host hx(in.t);
        for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim)
          for (bool is_max : {true, false}) {
            // First position of the extreme along dim.
            Shape kept = shape;
            kept[dim] = 1;
            Host best(kept, 0.0), pos(kept, 0.0);
            for_each_index(shape, [&](const Shape& idx) {
              Shape o = idx;
              o[dim] = 0;
              const double v = hx.at(idx);
              const int64_t f = best.flat(o);
              if (idx[dim] == 0 || (is_max ? v > best.v[f] : v < best.v[f])) {
                best.v[f] = v;
                pos.v[f] = static_cast<double>(idx[dim]);
              }
            });
            const Tensor got = is_max ? argmax(in.t, dim, true) : argmin(in.t, dim, true);
            EXPECT_EQ(got.dtype(), kInt64);
            EXPECT_TRUE(all_close(to(got, kFloat64), pos.tensor(kFloat64), 0, 0))
                << (is_max ? "argmax" : "argmin") << " dim " << dim << " of " << in.layout << " " << in.t.describe();
          }
      }
    }
}

TEST(ReductionKernels, CumsumForwardAndReverseAlongEachDim) {
  for (DType dtype : kDtypes)
    for (const Shape& shape : {Shape{3, 4, 5}, Shape{6}, Shape{2, 70000}}) {
      Generator gen(7);
      for (const Input& in : layouts(shape, dtype, gen)) {
        const Host hx(in.t);
        for (int64_t dim = 0; dim < static_cast<int64_t>(shape.size()); ++dim)
          for (bool reverse : {false, true}) {
            // Walk each line along dim from its first (or, reversed, last) element.
            Host expected(shape, 0.0);
            for_each_index(shape, [&](const Shape& idx) {
              if (idx[dim] != 0) return;
              Shape j = idx;
              double s = 0;
              for (int64_t k = 0; k < shape[dim]; ++k) {
                j[dim] = reverse ? shape[dim] - 1 - k : k;
                s += hx.at(j);
                expected.v[expected.flat(j)] = s;
              }
            });
            EXPECT_TRUE(all_close(cumsum(in.t, dim, reverse), expected.tensor(dtype), rtol_for(dtype) * 10,
                                  atol_for(dtype) * 10))
                << (reverse ? "reverse " : "") << "cumsum dim " << dim << " of " << in.layout << " " << in.t.describe();
          }
      }
    }
}

// ---- matmul ----

// a (..., M, K) @ b (..., K, N) with NumPy's vector rules and batch broadcasting.
Host matmul_ref(const Host& a_in, const Host& b_in) {
  Host a = a_in, b = b_in;
  const bool a_vec = a.shape.size() == 1, b_vec = b.shape.size() == 1;
  if (a_vec) a.shape.insert(a.shape.begin(), 1);
  if (b_vec) b.shape.push_back(1);
  const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
  const Shape batch_a(a.shape.begin(), a.shape.end() - 2), batch_b(b.shape.begin(), b.shape.end() - 2);
  const Shape batch = broadcast_shapes(batch_a, batch_b, "reference matmul");
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Host out(out_shape, 0.0);
  for_each_index(out_shape, [&](const Shape& idx) {
    Shape ia = idx, ib = idx;
    double s = 0;
    for (int64_t p = 0; p < k; ++p) {
      ia.back() = p;  // (…, i, p)
      ib[ib.size() - 2] = p;
      ib.back() = idx.back();
      s += a.broadcast_at(ia) * b.broadcast_at(ib);
    }
    out.v[out.flat(idx)] = s;
  });
  Shape final_shape = batch;
  if (!a_vec) final_shape.push_back(m);
  if (!b_vec) final_shape.push_back(n);
  out.shape = final_shape;
  return out;
}

// A (rows, cols) operand, stored as given or transposed (then viewed back), with optional batch.
Tensor operand(Shape batch, int64_t rows, int64_t cols, bool stored_transposed, DType dtype, Generator& gen) {
  Shape stored = batch;
  stored.push_back(stored_transposed ? cols : rows);
  stored.push_back(stored_transposed ? rows : cols);
  const Tensor t = randn(stored, dtype, &gen);
  return stored_transposed ? transpose(t, -1, -2) : t;
}

void expect_matmul(const Tensor& a, const Tensor& b, const std::string& what) {
  const Tensor out = matmul(a, b);
  const Host expected = matmul_ref(Host(a), Host(b));
  EXPECT_TRUE(all_close(out, expected.tensor(a.dtype()), a.dtype() == kFloat64 ? 1e-12 : 1e-5,
                        a.dtype() == kFloat64 ? 1e-12 : 1e-5))
      << what << ": " << a.describe() << " strides " << shape_str(a.strides()) << " @ " << b.describe() << " strides "
      << shape_str(b.strides());
}

TEST(MatmulKernel, EveryTransposeCombination) {
  for (DType dtype : kDtypes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Generator gen(8);
        const std::string what = std::string("a") + (ta ? "^T" : "") + " b" + (tb ? "^T" : "");
        expect_matmul(operand({}, 5, 7, ta, dtype, gen), operand({}, 7, 3, tb, dtype, gen), what);
        expect_matmul(operand({2}, 5, 7, ta, dtype, gen), operand({2}, 7, 3, tb, dtype, gen), "batched " + what);
        expect_matmul(operand({3}, 4, 6, ta, dtype, gen), operand({}, 6, 2, tb, dtype, gen), "b shared " + what);
        expect_matmul(operand({}, 4, 6, ta, dtype, gen), operand({3}, 6, 2, tb, dtype, gen), "a shared " + what);
        expect_matmul(operand({2, 1}, 3, 4, ta, dtype, gen), operand({3}, 4, 5, tb, dtype, gen),
                      "batch broadcast " + what);
      }
}

TEST(MatmulKernel, VectorsStridesAndEmptySizes) {
  for (DType dtype : kDtypes) {
    Generator gen(9);
    const auto r = [&](const Shape& s) { return randn(s, dtype, &gen); };
    expect_matmul(r({4}), r({4, 3}), "vector @ matrix");
    expect_matmul(r({3, 4}), r({4}), "matrix @ vector");
    expect_matmul(r({4}), r({4}), "vector @ vector");
    expect_matmul(r({2, 3, 4}), r({4}), "batch @ vector");
    expect_matmul(r({4}), r({2, 4, 3}), "vector @ batch");
    expect_matmul(slice(r({3, 9}), 1, 0, 8, 2), slice(r({9, 5}), 0, 1, 9, 2), "sliced operands");
    expect_matmul(slice(r({4, 3, 5}), 0, 0, 4, 2), r({5, 2}), "batch-sliced a, shared b");
    expect_matmul(expand(r({1, 3, 4}), {2, 3, 4}), r({2, 4, 5}), "expanded a");
    expect_matmul(r({2, 3, 4}), expand(r({4, 5}), {2, 4, 5}), "expanded b");
    expect_matmul(narrow(r({2, 3, 6}), 2, 1, 4), r({4, 5}), "narrowed rows of a, shared b");
    // One row broadcast over the batch (all strides but the last 0) against a shared b: the rows
    // must not be folded into one gemm as if they were distinct rows in memory.
    expect_matmul(expand(r({4}), {3, 1, 4}), r({4, 5}), "broadcast single row, shared b");
    expect_matmul(expand(r({1, 1, 4}), {2, 3, 1, 4}), r({4, 5}), "broadcast single row over two batch dims");
    expect_matmul(unsqueeze(select(r({3, 2, 4}), 1, 1), 1), r({4, 5}), "selected rows, shared b");
    expect_matmul(r({3, 1, 4}), r({4, 5}), "single-row batch, shared b");
    expect_matmul(unsqueeze(slice(r({3, 8}), 1, 0, 8, 2), 1), r({4, 5}), "single strided rows, shared b");
    expect_matmul(r({3, 4}), slice(r({8}), 0, 0, 8, 2), "matrix @ strided vector");
    expect_matmul(slice(r({9}), 0, 1, 9, 2), r({4, 3}), "strided vector @ matrix");
    expect_matmul(r({1, 4}), r({4, 3}), "one row");
    expect_matmul(r({3, 0}), r({0, 4}), "K = 0");
    expect_matmul(r({2, 3, 0}), r({2, 0, 4}), "batched K = 0");
    expect_matmul(r({0, 3, 4}), r({4, 2}), "zero-size batch");
    expect_matmul(r({0, 4}), r({4, 3}), "zero rows");
    expect_matmul(r({3, 4}), r({4, 0}), "zero columns");
    expect_matmul(r({64, 70}), r({70, 50}), "larger");
  }
}

// ---- indexing ----

TEST(IndexKernels, IndexSelectAndIndexAdd) {
  for (DType dtype : kDtypes) {
    Generator gen(10);
    const Tensor index = from_vector(std::vector<int64_t>{2, 0, 2, 4}, {4});
    for (const Input& in : layouts({5, 3, 6}, dtype, gen)) {
      const Host hx(in.t);
      for (int64_t dim : {0, 2}) {
        Shape out_shape = in.t.shape();
        out_shape[dim] = 4;
        Host expected(out_shape, 0.0);
        const std::vector<int64_t> ids = index.to_vector<int64_t>();
        for_each_index(out_shape, [&](const Shape& idx) {
          Shape src = idx;
          src[dim] = ids[idx[dim]];
          expected.v[expected.flat(idx)] = hx.at(src);
        });
        EXPECT_TRUE(all_close(index_select(in.t, dim, index), expected.tensor(dtype), 0, 0))
            << "index_select dim " << dim << " of " << in.layout;

        // index_add, the adjoint: repeated ids (2 twice) accumulate.
        const Tensor src = randn(out_shape, dtype, &gen);
        const Host hs(src);
        Tensor acc = randn(in.t.shape(), dtype, &gen);
        Host acc_expected(acc);
        for_each_index(out_shape, [&](const Shape& idx) {
          Shape dst = idx;
          dst[dim] = ids[idx[dim]];
          acc_expected.v[acc_expected.flat(dst)] += hs.at(idx);
        });
        backend_for(acc).index_add(acc, dim, index, src);
        EXPECT_TRUE(all_close(acc, acc_expected.tensor(dtype), rtol_for(dtype), atol_for(dtype)))
            << "index_add dim " << dim;
      }
    }
  }
}

TEST(IndexKernels, GatherAndScatterAdd) {
  for (DType dtype : kDtypes) {
    Generator gen(11);
    for (const Input& in : layouts({4, 5, 3}, dtype, gen)) {
      const Host hx(in.t);
      for (int64_t dim : {0, 1, 2}) {
        // An index no larger than x outside dim, with repeats along dim.
        const Shape index_shape = {3, 4, 2};
        const Tensor index = randint(0, in.t.size(dim), index_shape, kCPU, &gen);
        const std::vector<int64_t> ids = index.to_vector<int64_t>();
        Host gathered(index_shape, 0.0);
        for_each_index(index_shape, [&](const Shape& idx) {
          Shape src = idx;
          src[dim] = ids[gathered.flat(idx)];
          gathered.v[gathered.flat(idx)] = hx.at(src);
        });
        EXPECT_TRUE(all_close(gather(in.t, dim, index), gathered.tensor(dtype), 0, 0))
            << "gather dim " << dim << " of " << in.layout;

        const Tensor src = transpose(randn({2, 4, 3}, dtype, &gen), 0, 2);  // (3, 4, 2), strided
        const Host hs(src);
        Host scattered(hx);
        for_each_index(index_shape, [&](const Shape& idx) {
          Shape dst = idx;
          dst[dim] = ids[gathered.flat(idx)];
          scattered.v[scattered.flat(dst)] += hs.at(idx);
        });
        EXPECT_TRUE(all_close(scatter_add(in.t, dim, index, src), scattered.tensor(dtype), rtol_for(dtype),
                              atol_for(dtype)))
            << "scatter_add dim " << dim << " into " << in.layout;
      }
    }
  }
}

TEST(IndexKernels, OutOfRangeIndicesAreErrors) {
  const Tensor x = randn({3, 4}, kFloat64);
  EXPECT_LINEA_ERROR(index_select(x, 0, from_vector(std::vector<int64_t>{0, 3})), "index_select", "out of range");
  EXPECT_LINEA_ERROR(gather(x, 1, from_vector(std::vector<int64_t>{0, -1}, {1, 2})), "gather", "out of range");
  EXPECT_LINEA_ERROR(scatter_add(x, 1, from_vector(std::vector<int64_t>{4}, {1, 1}), randn({1, 1}, kFloat64)),
                     "scatter_add", "out of range");
}

}  // namespace
}  // namespace linea
