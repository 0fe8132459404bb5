// Each fused kernel (softmax, log_softmax, cross_entropy, layer_norm, rms_norm) against the
// composite formula it replaces, built from elementary differentiable ops: forward values and
// the gradients of every input, in float64 and float32, on several shapes.
#include "autograd/ops.h"
#include "tests/test_util.h"

namespace linea {
namespace {

using testing::all_close;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance_for(DType dtype) { return dtype == kFloat64 ? Tolerance{1e-10, 1e-12} : Tolerance{2e-5, 2e-6}; }

// Leaves of the given shapes; a shape with a size-0 entry makes an empty input.
std::vector<Tensor> leaves(const std::vector<Shape>& shapes, DType dtype, Generator& gen, double scale = 1.0) {
  std::vector<Tensor> xs;
  for (const Shape& s : shapes) {
    Tensor x = detach(randn(s, dtype, &gen) * scale);
    xs.push_back(x.requires_grad_(true));
  }
  return xs;
}

// The fused and composite functions agree in value and in the gradient of every input for one
// random cotangent.
void expect_same(const Fn& fused, const Fn& composite, const std::vector<Tensor>& xs, const std::string& what) {
  SCOPED_TRACE(what);
  const Tolerance tol = tolerance_for(xs[0].dtype());
  const Tensor y = fused(xs), y_ref = composite(xs);
  ASSERT_TRUE(all_close(y, y_ref, tol.rtol, tol.atol));
  if (y.numel() == 0) return;
  Generator gen(99);
  const Tensor u = randn(y.shape(), y.dtype(), &gen);
  const std::vector<Tensor> g = grad(y, xs, u, false, true), g_ref = grad(y_ref, xs, u, false, true);
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(g[i].defined(), g_ref[i].defined()) << "input " << i;
    if (g[i].defined()) EXPECT_TRUE(all_close(g[i], g_ref[i], tol.rtol, tol.atol)) << "gradient of input " << i;
  }
}

const DType kDtypes[] = {kFloat64, kFloat32};

struct DimCase {
  Shape shape;
  int64_t dim;
};
// Last, first and middle dims, one of them long enough to take the threaded path.
const DimCase kSoftmaxCases[] = {
    {{4, 7}, -1}, {{4, 7}, 0}, {{3, 5, 6}, 1}, {{2, 3, 4, 5}, 2}, {{9}, 0}, {{64, 1100}, 1}, {{1100, 40}, 0},
};

// softmax(x) = exp(x - logsumexp(x)) and log_softmax(x) = x - logsumexp(x), along dim.
TEST(FusedVsComposite, SoftmaxAndLogSoftmax) {
  for (bool log : {false, true})
    for (DType dtype : kDtypes)
      for (const DimCase& c : kSoftmaxCases) {
        Generator gen(1);
        const int64_t d = c.dim;
        expect_same([d, log](const std::vector<Tensor>& x) { return log ? log_softmax(x[0], d) : softmax(x[0], d); },
                    [d, log](const std::vector<Tensor>& x) {
                      const Tensor z = x[0] - logsumexp(x[0], {d}, true);
                      return log ? z : exp(z);
                    },
                    leaves({c.shape}, dtype, gen, 3.0),
                    std::string(log ? "log_softmax " : "softmax ") + dtype_name(dtype) + " " + shape_str(c.shape) +
                        " dim " + std::to_string(d));
      }
}

TEST(FusedVsComposite, SoftmaxOfStridedInput) {
  for (DType dtype : kDtypes) {
    Generator gen(3);
    expect_same([](const std::vector<Tensor>& x) { return softmax(transpose(x[0], 0, 2), 1); },
                [](const std::vector<Tensor>& x) {
                  const Tensor v = transpose(x[0], 0, 2);
                  return exp(v - logsumexp(v, {1}, true));
                },
                leaves({{5, 3, 4}}, dtype, gen), dtype_name(dtype));
  }
}

// Targets in [0, classes), with every third one set to ignore_index.
Tensor targets_for(const Shape& rows, int64_t classes, int64_t ignore_index, Generator& gen) {
  std::vector<int64_t> t = randint(0, classes, rows, kCPU, &gen).to_vector<int64_t>();
  for (size_t i = 0; i < t.size(); i += 3) t[i] = ignore_index;
  return from_vector(t, rows);
}

// forward was: loss_i = -log_softmax(logits_i)[t_i] on rows whose target is kept; the mean
// divides by the number of kept rows.
Tensor cross_entropy_composite(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Reduction r) {
  const Tensor ignore = full({}, static_cast<double>(ignore_index), kInt64);
  const Tensor kept = ne(targets, ignore);
  const Tensor safe_targets = where(kept, targets, full({}, 0.0, kInt64));
  const Tensor log_p = logits - logsumexp(logits, {-1}, true);
  const Tensor picked = squeeze(gather(log_p, -1, unsqueeze(safe_targets, -1)), -1);
  const Tensor losses = neg(picked) * to(kept, logits.dtype());
  switch (r) {
    case Reduction::None: return losses;
    case Reduction::Sum: return sum(losses);
    case Reduction::Mean: return sum(losses) / sum(to(kept, logits.dtype()));
  }
  return losses;
}

TEST(FusedVsComposite, CrossEntropyWithIgnoreIndex) {
  struct Case {
    Shape rows;
    int64_t classes;
    int64_t ignore_index;
  };
  const Case cases[] = {{{6}, 5, -100}, {{2, 4}, 7, -100}, {{10}, 3, 1}, {{300}, 257, -1}};
  for (DType dtype : kDtypes)
    for (const Case& c : cases)
      for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
        Generator gen(4);
        Shape shape = c.rows;
        shape.push_back(c.classes);
        std::vector<Tensor> xs = leaves({shape}, dtype, gen, 2.0);
        const Tensor targets = targets_for(c.rows, c.classes, c.ignore_index, gen);
        const int64_t ii = c.ignore_index;
        expect_same([=](const std::vector<Tensor>& x) { return cross_entropy(x[0], targets, ii, r); },
                    [=](const std::vector<Tensor>& x) { return cross_entropy_composite(x[0], targets, ii, r); }, xs,
                    dtype_name(dtype) + std::string(" ") + shape_str(shape) + " reduction " +
                        std::to_string(static_cast<int>(r)));
      }
}

// (x - mean) / sqrt(var + eps) * w + b with the biased variance, over the last dim.
Tensor layer_norm_composite(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  Tensor y = (x - mean(x, {-1}, true)) / sqrt(var(x, {-1}, 0, true) + eps);
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return y;
}

Tensor rms_norm_composite(const Tensor& x, const Tensor& w, double eps) {
  const Tensor y = x * rsqrt(mean(x * x, {-1}, true) + eps);
  return w.defined() ? y * w : y;
}

const Shape kNormShapes[] = {{4, 6}, {2, 3, 8}, {5}, {0, 4}, {128, 300}};

// Runs f on (x, weight?, bias?) for each combination of the optional parameters.
void for_each_affine(bool with_bias, const std::function<void(bool, bool)>& f) {
  for (bool w : {true, false})
    for (bool b : {true, false})
      if (with_bias || !b) f(w, b);
}

TEST(FusedVsComposite, LayerNorm) {
  for (DType dtype : kDtypes)
    for (const Shape& shape : kNormShapes)
      for_each_affine(true, [&](bool has_w, bool has_b) {
        Generator gen(5);
        const int64_t c = shape.back();
        std::vector<Shape> shapes = {shape};
        if (has_w) shapes.push_back({c});
        if (has_b) shapes.push_back({c});
        const std::vector<Tensor> xs = leaves(shapes, dtype, gen);
        const Tensor w = has_w ? xs[1] : Tensor(), b = has_b ? xs.back() : Tensor();
        expect_same([=](const std::vector<Tensor>& x) { return layer_norm(x[0], w, b, 1e-5); },
                    [=](const std::vector<Tensor>& x) { return layer_norm_composite(x[0], w, b, 1e-5); }, xs,
                    dtype_name(dtype) + std::string(" ") + shape_str(shape) + (has_w ? " weight" : "") +
                        (has_b ? " bias" : ""));
      });
}

TEST(FusedVsComposite, RmsNorm) {
  for (DType dtype : kDtypes)
    for (const Shape& shape : kNormShapes)
      for_each_affine(false, [&](bool has_w, bool) {
        Generator gen(6);
        std::vector<Shape> shapes = {shape};
        if (has_w) shapes.push_back({shape.back()});
        const std::vector<Tensor> xs = leaves(shapes, dtype, gen);
        const Tensor w = has_w ? xs[1] : Tensor();
        expect_same([=](const std::vector<Tensor>& x) { return rms_norm(x[0], w, 1e-6); },
                    [=](const std::vector<Tensor>& x) { return rms_norm_composite(x[0], w, 1e-6); }, xs,
                    dtype_name(dtype) + std::string(" ") + shape_str(shape) + (has_w ? " weight" : ""));
      });
}

TEST(FusedVsComposite, NormsOfStridedInput) {
  for (DType dtype : kDtypes) {
    Generator gen(7);
    const std::vector<Tensor> xs = leaves({{6, 4}, {6}, {6}}, dtype, gen);  // x seen as (4, 6)
    expect_same([](const std::vector<Tensor>& x) { return layer_norm(t(x[0]), x[1], x[2]) + rms_norm(t(x[0]), x[1]); },
                [](const std::vector<Tensor>& x) {
                  return layer_norm_composite(t(x[0]), x[1], x[2], 1e-5) + rms_norm_composite(t(x[0]), x[1], 1e-6);
                },
                xs, dtype_name(dtype));
  }
}

}  // namespace
}  // namespace linea
