// Each fused kernel (softmax, log_softmax, cross_entropy, layer_norm, rms_norm, rotary_embedding,
// ReGLA's normalized_exp and refined_log_gate) against the composite formula it replaces, built
// from elementary differentiable ops: forward values and the gradients of every input, in float64
// and float32, on several shapes.
#include <limits>
#include <string>

#include "autograd/ops.h"
#include "nn/linear_attention/feature_maps.h"
#include "nn/linear_attention/gates.h"
#include "nn/linear_attention/key_max.h"
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
// random cotangent (within the dtype's tolerance unless one is given).
void expect_same(const Fn& fused, const Fn& composite, const std::vector<Tensor>& xs, const std::string& what,
                 std::optional<Tolerance> given = {}) {
  SCOPED_TRACE(what);
  const Tolerance tol = given.value_or(tolerance_for(xs[0].dtype()));
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
                     "tables must be float64");
  EXPECT_LINEA_ERROR(rotary_embedding(zeros({4}, kFloat64), c, c), "rotary_embedding", "expects x (..., T, dh)");
  Tensor trainable = zeros({5, 2}, kFloat64);
  trainable.requires_grad_(true);
  EXPECT_LINEA_ERROR(rotary_embedding(x, trainable, c), "rotary_embedding", "take no gradient");
}

// ---- ReGLA's fused maps (nn/linear_attention) ----------------------------------------------------------

// float64 to 1e-12, float32 as the other fused kernels.
Tolerance map_tolerance(DType dtype) { return dtype == kFloat64 ? Tolerance{1e-12, 1e-12} : tolerance_for(dtype); }

// The composite chains normalized_exp replaces, with the max as a second result:
//   RowMax     exp(x - amax(x, -1)) * scale
//   PrefixMax  exp(x - mu) * exp(mu - m) * scale, mu = amax(x, -1), m its running max by doubling
//              (nn/linear_attention/key_max.cpp), continued from previous (which wins ties, as there).
NormalizedExp normalized_exp_composite(const Tensor& x, NormalizedExpMode mode, double scale, const Tensor& previous) {
  const Tensor mu = amax(x, {-1}, true);
  if (mode == NormalizedExpMode::RowMax) return {exp(x - mu) * scale, mu};
  Tensor m = nn::linear::running_max(mu, 2);
  if (previous.defined()) m = where(gt(m, previous), m, previous);
  return {exp(x - mu) * exp(mu - m) * scale, m};
}

using MapOp = NormalizedExp (*)(const Tensor&, NormalizedExpMode, double, const Tensor&);

Tensor flat_results(const NormalizedExp& r) { return cat({flatten(r.features), flatten(r.max)}, 0); }

struct MapCase {
  Shape x;  // (B, H, T, d) as the op sees it
  bool heads_last = false;  // leaves (B, T, H, d), transposed
  bool previous = false;
};
const MapCase kMapCases[] = {
    {{2, 3, 17, 5}},       {{1, 2, 65, 33}, true, true}, {{3, 1, 1, 7}, false, true}, {{2, 2, 100, 1}},
    {{1, 1, 64, 16}, true}, {{2, 2, 33, 64}, false, true}, {{1, 3, 1000, 3}, true, true},
};

// x's leaf and, with a previous running max, one near the top of x's values so that it holds the
// max over the first positions of some sequences and loses it later.
std::vector<Tensor> map_leaves(const MapCase& c, DType dtype, Generator& gen) {
  const Shape leaf = c.heads_last ? Shape{c.x[0], c.x[2], c.x[1], c.x[3]} : c.x;
  std::vector<Tensor> xs = leaves({leaf}, dtype, gen, 2.0);
  if (c.previous) {
    Tensor prev = detach(uniform({c.x[0], c.x[1], 1, 1}, 3.0, 5.0, dtype, &gen));
    xs.push_back(prev.requires_grad_(true));
  }
  return xs;
}

std::string map_label(const MapCase& c, DType dtype, NormalizedExpMode mode) {
  return std::string(mode == NormalizedExpMode::RowMax ? "RowMax " : "PrefixMax ") + dtype_name(dtype) + " " +
         shape_str(c.x) + (c.heads_last ? " heads last" : "") + (c.previous ? " with previous" : "");
}

TEST(FusedVsComposite, NormalizedExpMatchesTheCompositeMaps) {
  for (DType dtype : kDtypes)
    for (NormalizedExpMode mode : {NormalizedExpMode::RowMax, NormalizedExpMode::PrefixMax})
      for (const MapCase& c : kMapCases) {
        if (mode == NormalizedExpMode::RowMax && c.previous) continue;
        Generator gen(10);
        const double scale = mode == NormalizedExpMode::RowMax ? 0.37 : 1.0;
        auto call = [&c, mode, scale](MapOp op) -> Fn {
          return [&c, mode, scale, op](const std::vector<Tensor>& x) {
            const Tensor seen = c.heads_last ? transpose(x[0], 1, 2) : x[0];
            return flat_results(op(seen, mode, scale, x.size() > 1 ? x[1] : Tensor()));
          };
        };
        expect_same(call(normalized_exp), call(normalized_exp_composite), map_leaves(c, dtype, gen),
                    map_label(c, dtype, mode), map_tolerance(dtype));
      }
}

// What the layer replaces: the normalized exp map's key features times normalize_keys' key scale,
// its log decay lambda and its last max, against prefix_normalized_keys.
TEST(FusedVsComposite, PrefixNormalizedKeysMatchTheKeyMaxChain) {
  using namespace nn::linear;
  for (DType dtype : kDtypes)
    for (const MapCase& c : kMapCases) {
      Generator gen(11);
      auto map = make_feature_map({.kind = FeatureMapKind::NormalizedExp}, c.x[1], c.x[3], gen);
      auto seen = [&c](const std::vector<Tensor>& x) { return c.heads_last ? transpose(x[0], 1, 2) : x[0]; };
      auto previous = [](const std::vector<Tensor>& x) { return x.size() > 1 ? x[1] : Tensor(); };
      auto flat = [](const Tensor& features, const KeyNormalization& n) {
        return cat({flatten(features), flatten(n.log_decay), flatten(n.last_max)}, 0);
      };
      expect_same(
          [&](const std::vector<Tensor>& x) {
            const NormalizedKeys keys = prefix_normalized_keys(seen(x), previous(x));
            return flat(keys.features, keys.norm);
          },
          [&](const std::vector<Tensor>& x) {
            const Tensor k = seen(x);
            const KeyNormalization n = normalize_keys(map->key_log_shift(k), KeyMaxMode::Prefix, previous(x));
            return flat(map->forward(k, Role::Key) * n.key_scale, n);
          },
          map_leaves(c, dtype, gen), map_label(c, dtype, NormalizedExpMode::PrefixMax), map_tolerance(dtype));
    }
}

// The running max at the last position, which decoding carries on with: without a gradient the
// kernel writes it into memory of its own (a state keeps it after the prompt's maxima are freed);
// while a gradient is recorded it is a view of max, so the gradient reaches the max's holder.
TEST(FusedVsComposite, NormalizedExpLastMaxIsItsOwnWithoutAGradient) {
  Generator gen(13);
  for (DType dtype : kDtypes)
    for (int64_t T : {1, 7, 300})
      for (const bool with_previous : {false, true}) {
        const Tensor x = randn({2, 3, T, 5}, dtype, &gen) * 2.0;
        const Tensor previous = with_previous ? randn({2, 3, 1, 1}, dtype, &gen) + 1.0 : Tensor();
        const std::string what = std::string(dtype_name(dtype)) + " T=" + std::to_string(T) +
                                 (with_previous ? " with previous" : "");
        {
          const NoGradGuard no_grad;
          const NormalizedExp out = normalized_exp(x, NormalizedExpMode::PrefixMax, 1.0, previous);
          EXPECT_EQ(out.last_max.shape(), (Shape{2, 3, 1, 1})) << what;
          EXPECT_EQ(out.last_max.storage()->nbytes(), 6 * dtype_size(dtype)) << what;
          EXPECT_TRUE(all_close(out.last_max, narrow(out.max, 2, T - 1, 1), 0, 0)) << what;
          EXPECT_FALSE(normalized_exp(x, NormalizedExpMode::RowMax).last_max.defined()) << what;
        }
        const Tensor leaf = clone(x).requires_grad_();
        const NormalizedExp recorded = normalized_exp(leaf, NormalizedExpMode::PrefixMax, 1.0, previous);
        EXPECT_EQ(recorded.last_max.storage(), recorded.max.storage()) << what << ": a view while recording";
        EXPECT_TRUE(all_close(recorded.last_max, narrow(recorded.max, 2, T - 1, 1), 0, 0)) << what;
        // Its gradient reaches the max's holder: d(sum of last maxima) / dx is 1 at one element of
        // each sequence (or at previous).
        backward(sum(recorded.last_max));
        const double reached = sum(leaf.grad()).item();
        EXPECT_LE(reached, 6.0 + 1e-12) << what;
        if (!with_previous) EXPECT_NEAR(reached, 6.0, 1e-12) << what;
      }
}

// Ties across positions and with previous: the gradient goes to the earliest holder, exactly as
// the composite's running max sends it (each token's own max is unique, where amax would split).
TEST(FusedVsComposite, NormalizedExpTiesGoToTheEarliestPosition) {
  Generator gen(12);
  const int64_t B = 2, H = 1, T = 12, d = 4;
  std::vector<double> x = (uniform({B, H, T, d}, -1.0, 0.5, kFloat64, &gen)).to_vector<double>();
  auto at = [&](int64_t b, int64_t t, int64_t c) -> double& { return x[static_cast<size_t>((b * T + t) * d + c)]; };
  for (int64_t b = 0; b < B; ++b) {
    at(b, 2, 1) = at(b, 5, 3) = 1.0;  // a max, tied later
    at(b, 7, 0) = at(b, 9, 2) = at(b, 11, 1) = 2.0;  // a larger one, tied twice
  }
  for (const bool with_previous : {false, true}) {
    std::vector<Tensor> xs = {from_vector(x, {B, H, T, d})};
    xs[0].requires_grad_(true);
    if (with_previous) xs.push_back(full({B, H, 1, 1}, 1.0, kFloat64).requires_grad_(true));  // ties at t = 2
    expect_same(
        [](const std::vector<Tensor>& v) {
          return flat_results(normalized_exp(v[0], NormalizedExpMode::PrefixMax, 1.0, v.size() > 1 ? v[1] : Tensor()));
        },
        [](const std::vector<Tensor>& v) {
          const Tensor previous = v.size() > 1 ? v[1] : Tensor();
          return flat_results(normalized_exp_composite(v[0], NormalizedExpMode::PrefixMax, 1.0, previous));
        },
        xs, with_previous ? "previous ties" : "positions tie", map_tolerance(kFloat64));
  }
}

// A tie within a token: the whole gradient of m goes to the first feature holding the max (amax
// would split it), so dx = y dy + (dm - sum y dy) at that feature.
TEST(FusedVsComposite, NormalizedExpTieWithinATokenGoesToTheFirstFeature) {
  for (const NormalizedExpMode mode : {NormalizedExpMode::RowMax, NormalizedExpMode::PrefixMax}) {
    Tensor x = from_vector(std::vector<double>{0.3, 1.5, -0.2, 1.5, 1.5}, {1, 1, 1, 5});
    x.requires_grad_(true);
    const NormalizedExp out = normalized_exp(x, mode, 2.0);
    const Tensor dy = from_vector(std::vector<double>{0.7, -1.1, 0.4, 0.9, -0.3}, {1, 1, 1, 5});
    const Tensor dm = full({1, 1, 1, 1}, 0.8, kFloat64);
    const Tensor dx = grad(sum(out.features * dy) + sum(out.max * dm), {x})[0];
    std::vector<double> expected = (out.features * dy).to_vector<double>();
    expected[1] += 0.8 - sum(out.features * dy).item();
    EXPECT_TRUE(all_close(dx, from_vector(expected, {1, 1, 1, 5}), 1e-14, 1e-14));
  }
}

// The result and the gradient keep x's memory order, so the layer's head reshapes stay views; a
// tensor whose features are strided is read through a copy and answered contiguously.
TEST(FusedVsComposite, NormalizedExpKeepsTheInputsMemoryOrder) {
  Generator gen(13);
  Tensor leaf = detach(randn({2, 5, 3, 4}, kFloat64, &gen));
  leaf.requires_grad_(true);
  const Tensor x = transpose(leaf, 1, 2);  // (B, H, T, d) with (B, T, H, d) strides
  const NormalizedExp out = normalized_exp(x, NormalizedExpMode::PrefixMax);
  EXPECT_EQ(out.features.strides(), x.strides());
  EXPECT_TRUE(out.max.is_contiguous());
  EXPECT_EQ(grad(sum(out.features * randn(x.shape(), kFloat64, &gen)), {x})[0].strides(), x.strides());
  EXPECT_TRUE(normalized_exp(transpose(leaf, 2, 3), NormalizedExpMode::RowMax).features.is_contiguous());
  // The max alone: the features' gradient is absent (the op is one node with two outputs). Each
  // call transposes afresh: the grad() above freed x's node.
  const Tensor w = randn(out.max.shape(), kFloat64, &gen);
  const NormalizedExpMode prefix = NormalizedExpMode::PrefixMax;
  const Tensor fused = grad(sum(normalized_exp(transpose(leaf, 1, 2), prefix).max * w), {leaf})[0];
  const Tensor composite =
      grad(sum(normalized_exp_composite(transpose(leaf, 1, 2), prefix, 1.0, Tensor()).max * w), {leaf})[0];
  EXPECT_TRUE(all_close(fused, composite, 1e-12, 1e-12));
}

// clamp(refined_log_gate(a, c), floor): floors that hold for none, some and all of the draws.
TEST(FusedVsComposite, RefinedLogGateMatchesTheClampedComposite) {
  const double none = -std::numeric_limits<double>::infinity();
  struct Case {
    Shape shape;
    double floor, scale;
    bool heads_last;  // leaves (B, T, H, dv) seen as (B, H, T, dv)
  };
  const Case cases[] = {{{2, 3, 17, 5}, -20.0, 3.0, false}, {{4, 33}, -2.5, 3.0, false},
                        {{2, 9, 3, 16}, none, 4.0, true},   {{3, 7}, -20.0, 40.0, false},
                        {{1, 65, 2, 8}, -3.0, 2.0, true},   {{0, 5}, -20.0, 1.0, false}};
  for (DType dtype : kDtypes)
    for (const Case& c : cases) {
      Generator gen(14);
      auto seen = [&c](const Tensor& t) { return c.heads_last ? transpose(t, 1, 2) : t; };
      const double floor = c.floor;
      expect_same([&](const std::vector<Tensor>& x) { return refined_log_gate(seen(x[0]), seen(x[1]), floor); },
                  [&](const std::vector<Tensor>& x) {
                    return clamp(nn::linear::refined_log_gate(seen(x[0]), seen(x[1])), floor, std::nullopt);
                  },
                  leaves({c.shape, c.shape}, dtype, gen, c.scale),
                  dtype_name(dtype) + std::string(" ") + shape_str(c.shape) + " floor " + std::to_string(floor),
                  map_tolerance(dtype));
    }
}

// The biases the ReGLA gate hands over, (H, 1, dv) against (B, H, T, dv): the same as adding them
// first, gradients of the biases included.
TEST(FusedVsComposite, RefinedLogGateBiasesAreAddedInside) {
  for (DType dtype : kDtypes)
    for (double floor : {-20.0, -1.5}) {
      Generator gen(15);
      auto seen = [](const Tensor& t) { return transpose(t, 1, 2); };
      expect_same(
          [&](const std::vector<Tensor>& x) { return refined_log_gate(seen(x[0]), seen(x[1]), floor, x[2], x[3]); },
          [&](const std::vector<Tensor>& x) {
            return clamp(nn::linear::refined_log_gate(seen(x[0]) + x[2], seen(x[1]) + x[3]), floor, std::nullopt);
          },
          leaves({{2, 9, 3, 8}, {2, 9, 3, 8}, {3, 1, 8}, {3, 1, 8}}, dtype, gen, 3.0),
          dtype_name(dtype) + std::string(" biases, floor ") + std::to_string(floor), map_tolerance(dtype));
    }
}

// |a|, |c| up to 1e4: every term is a log-sigmoid, so values and gradients stay finite and equal
// to the composite's; the gradient of a floored entry is 0.
TEST(FusedVsComposite, RefinedLogGateStaysFiniteAtExtremes) {
  const std::vector<double> values = {-1e4, -700.0, -50.0, -3.0, 0.0, 2.5, 60.0, 800.0, 1e4};
  std::vector<double> as, cs;
  for (double a : values)
    for (double c : values) {
      as.push_back(a);
      cs.push_back(c);
    }
  const Shape shape{static_cast<int64_t>(as.size())};
  for (DType dtype : kDtypes)
    for (double floor : {-20.0, -std::numeric_limits<double>::infinity()}) {
      std::vector<Tensor> xs = {to(from_vector(as, shape), dtype), to(from_vector(cs, shape), dtype)};
      for (Tensor& x : xs) x.requires_grad_(true);
      const Tensor out = refined_log_gate(xs[0], xs[1], floor);
      const auto g = grad(sum(out), xs);
      for (const Tensor& t : {out, g[0], g[1]})
        for (double v : t.to_vector<double>()) EXPECT_TRUE(std::isfinite(v)) << dtype_name(dtype) << " floor " << floor;
      expect_same([floor](const std::vector<Tensor>& x) { return refined_log_gate(x[0], x[1], floor); },
                  [floor](const std::vector<Tensor>& x) {
                    return clamp(nn::linear::refined_log_gate(x[0], x[1]), floor, std::nullopt);
                  },
                  xs, std::string("extremes ") + dtype_name(dtype), map_tolerance(dtype));
    }
}

// At the floor itself the gradient is 0, as clamp's is (it passes only strictly above its min).
TEST(FusedVsComposite, RefinedLogGateHasNoGradientOnTheFloor) {
  Tensor a = from_vector(std::vector<double>{-2.0, 0.5, -2.0}, {3}), c = from_vector(std::vector<double>{0.3, 0.3, 0.3}, {3});
  a.requires_grad_(true);
  c.requires_grad_(true);
  const double floor = refined_log_gate(a, c, -std::numeric_limits<double>::infinity()).to_vector<double>()[0];
  const auto fused = grad(sum(refined_log_gate(a, c, floor)), {a, c});
  const Tensor composite_value = nn::linear::refined_log_gate(a, c);
  ASSERT_EQ(composite_value.to_vector<double>()[0], floor);  // the composite sits on the same floor
  const auto composite = grad(sum(clamp(composite_value, floor, std::nullopt)), {a, c});
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(fused[i].to_vector<double>()[0], 0.0);
    EXPECT_EQ(fused[i].to_vector<double>()[2], 0.0);
    EXPECT_GT(std::abs(fused[i].to_vector<double>()[1]), 0.01);  // above the floor: a gradient
    EXPECT_TRUE(all_close(fused[i], composite[i], 1e-12, 1e-14));
  }
}

TEST(FusedVsComposite, RefinedLogGateKeepsTheMemoryOrderOfA) {
  Generator gen(15);
  Tensor a_leaf = detach(randn({2, 5, 3, 4}, kFloat64, &gen)), c_leaf = detach(randn({2, 5, 3, 4}, kFloat64, &gen));
  a_leaf.requires_grad_(true);
  c_leaf.requires_grad_(true);
  const Tensor a = transpose(a_leaf, 1, 2), c = transpose(c_leaf, 1, 2);
  const Tensor out = refined_log_gate(a, c, -20.0);
  EXPECT_EQ(out.strides(), a.strides());
  const auto g = grad(sum(out * randn(out.shape(), kFloat64, &gen)), {a, c});
  EXPECT_EQ(g[0].strides(), a.strides());
  EXPECT_EQ(g[1].strides(), c.strides());
}

}  // namespace
}  // namespace linea
