// Each fused kernel (softmax, log_softmax, cross_entropy, layer_norm, rms_norm, rotary_embedding) against the
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

// RoPE's composite, x * [cos, cos] + rotate_half(x) * [sin, sin] on the first 2 half dims.
Tensor rotary_composite(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  const int64_t half = cos.size(1), dh = x.size(-1);
  const Tensor rot = narrow(x, -1, 0, 2 * half);
  const Tensor rotated_half = cat({-narrow(rot, -1, half, half), narrow(rot, -1, 0, half)}, -1);
  const Tensor y = rot * cat({cos, cos}, -1) + rotated_half * cat({sin, sin}, -1);
  return 2 * half == dh ? y : cat({y, narrow(x, -1, 2 * half, dh - 2 * half)}, -1);
}

TEST(FusedVsComposite, RotaryEmbedding) {
  struct Case {
    Shape x;
    int64_t half;
    bool heads_last;  // leaves (B, T, H, dh) seen as (B, H, T, dh)
  };
  const Case cases[] = {{{2, 3, 7, 8}, 4, false}, {{2, 9, 3, 10}, 3, true}, {{5, 6}, 3, false}, {{4, 70, 2, 64}, 32, true}};
  for (DType dtype : kDtypes)
    for (const Case& c : cases) {
      Generator gen(8);
      const std::vector<Tensor> xs = leaves({c.x}, dtype, gen);
      const int64_t length = c.heads_last ? c.x[1] : c.x[c.x.size() - 2];
      const Tensor angles = detach(rand({length, c.half}, dtype, &gen) * 20.0);
      const Tensor cos = linea::cos(angles), sin = linea::sin(angles);
      auto seen = [&](const Tensor& x) { return c.heads_last ? transpose(x, 1, 2) : x; };
      expect_same([&](const std::vector<Tensor>& x) { return rotary_embedding(seen(x[0]), cos, sin); },
                  [&](const std::vector<Tensor>& x) { return rotary_composite(seen(x[0]), cos, sin); }, xs,
                  dtype_name(dtype) + std::string(" ") + shape_str(c.x));
    }
}

// The result of a transposed input keeps the input's memory order, and so does the gradient, so
// that the layer's reshapes around RoPE stay views.
TEST(FusedVsComposite, RotaryEmbeddingKeepsTheInputsMemoryOrder) {
  Generator gen(9);
  Tensor leaf = detach(randn({2, 5, 3, 4}, kFloat64, &gen));
  leaf.requires_grad_(true);
  const Tensor x = transpose(leaf, 1, 2);  // (2, 3, 5, 4) with (B, T, H, dh) strides
  const Tensor cos = linea::cos(randn({5, 2}, kFloat64, &gen)), sin = linea::sin(randn({5, 2}, kFloat64, &gen));
  const Tensor y = rotary_embedding(x, cos, sin);
  EXPECT_EQ(y.strides(), x.strides());
  const Tensor g = grad(y, {x}, randn(y.shape(), kFloat64, &gen))[0];
  EXPECT_EQ(g.strides(), x.strides());
  // A non-dense input (a slice with a step) gives a contiguous result.
  const Tensor sliced = slice(leaf, 1, 0, 5, 2);
  EXPECT_TRUE(rotary_embedding(sliced, narrow(cos, 0, 0, 3), narrow(sin, 0, 0, 3)).is_contiguous());
}

TEST(FusedVsComposite, RotaryEmbeddingRejectsBadTables) {
  const Tensor x = randn({2, 5, 4}, kFloat64), c = zeros({5, 2}, kFloat64);
  EXPECT_LINEA_ERROR(rotary_embedding(x, zeros({4, 2}, kFloat64), zeros({4, 2}, kFloat64)), "rotary_embedding",
                     "T = x's dim -2");
  EXPECT_LINEA_ERROR(rotary_embedding(x, zeros({5, 3}, kFloat64), zeros({5, 3}, kFloat64)), "rotary_embedding",
                     "2 half <= x's last dim");
  EXPECT_LINEA_ERROR(rotary_embedding(x, c, zeros({5, 1}, kFloat64)), "rotary_embedding", "cos and sin (T, half)");
  EXPECT_LINEA_ERROR(rotary_embedding(x, zeros({5, 2}, kFloat32), zeros({5, 2}, kFloat32)), "rotary_embedding",
                     "different dtypes");
  EXPECT_LINEA_ERROR(rotary_embedding(zeros({4}, kFloat64), c, c), "rotary_embedding", "expects x (..., T, dh)");
  Tensor trainable = zeros({5, 2}, kFloat64);
  trainable.requires_grad_(true);
  EXPECT_LINEA_ERROR(rotary_embedding(x, trainable, c), "rotary_embedding", "take no gradient");
}

}  // namespace
}  // namespace linea
