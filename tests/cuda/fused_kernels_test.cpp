// The fused CUDA kernels of the row families (softmax, log_softmax, cross_entropy, layer_norm,
// rms_norm), the rotary embedding and ReGLA's fused maps (normalized_exp, refined_log_gate) against
// the CPU oracle, forward and backward, in float32 and float64, on awkward sizes (rows of 1, 3 and
// 1000; 50257 classes; widths that are not multiples of 32, and each row-group size of
// cuda/kernels/rows.cuh; sequences that span one and several scan tiles); each also against its
// composite formula on the GPU; the norms' parameter gradients bit for bit from run to run.
// Without a GPU every test skips.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tensor/backend.h"
#include "tests/cuda/fused_parity.h"

namespace linea::testing {
namespace {

const DType kDtypes[] = {kFloat64, kFloat32};

// Reductions are reassociated across threads, and float32 sums run over up to 50k terms.
Tolerance fused_tolerance(DType dtype) { return dtype == kFloat64 ? Tolerance{1e-10, 1e-12} : Tolerance{1e-4, 1e-5}; }

std::string label(const std::string& op, DType dtype, const Shape& shape) {
  return op + " " + dtype_name(dtype) + " " + shape_str(shape);
}

struct DimCase {
  Shape shape;
  int64_t dim;
};
// Last dim: a warp per row (1, 7, 33, 1000), blocks of 256 (1025, 8192) and 1024 (8193, 50257)
// threads; other dims take the (outer, D, inner) path.
const DimCase kSoftmaxCases[] = {
    {{1, 1}, -1},    {{3, 7}, -1},       {{1000, 33}, -1}, {{3, 1000}, -1},   {{5, 1025}, -1}, {{2, 8192}, -1},
    {{3, 8193}, -1}, {{2, 50257}, -1},   {{6, 7, 5}, 1},   {{1100, 40}, 0},   {{2, 3, 4, 5}, 2}, {{7}, 0},
};

TEST(CudaFusedKernels, SoftmaxMatchesCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (bool log : {false, true})
    for (DType dtype : kDtypes)
      for (const DimCase& c : kSoftmaxCases) {
        const int64_t d = c.dim;
        expect_device_parity([d, log](const std::vector<Tensor>& x) { return log ? log_softmax(x[0], d) : softmax(x[0], d); },
                             {random_normal(c.shape, dtype, 1) * 3.0}, fused_tolerance(dtype),
                             label(log ? "log_softmax" : "softmax", dtype, c.shape) + " dim " + std::to_string(d));
      }
}

TEST(CudaFusedKernels, SoftmaxOfStridedLargeAndMaskedInputs) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kDtypes) {
    const Tolerance tol = fused_tolerance(dtype);
    expect_device_parity([](const std::vector<Tensor>& x) { return softmax(transpose(x[0], 0, 1), -1); },
                         {random_normal({37, 5}, dtype, 2)}, tol, "transposed");
    // exp(800) overflows: the row max must come off first.
    expect_device_parity([](const std::vector<Tensor>& x) { return log_softmax(x[0] + 800.0, -1); },
                         {random_normal({4, 100}, dtype, 3)}, tol, "large logits");
    // -inf entries (a causal mask) get probability 0; a fully masked row is NaN on both devices.
    Tensor x = random_normal({3, 40}, dtype, 4);
    std::vector<bool> mask(120);
    for (int i = 0; i < 120; ++i) mask[i] = (i % 40) > 20 + i / 40 || i / 40 == 2;
    x = masked_fill(x, from_vector(mask, {3, 40}), -std::numeric_limits<double>::infinity());
    EXPECT_TRUE(matches_cpu(softmax(on_gpu(x), -1), softmax(x, -1), tol.rtol, tol.atol));
    EXPECT_TRUE(matches_cpu(log_softmax(on_gpu(x), -1), log_softmax(x, -1), tol.rtol, tol.atol));
  }
}

TEST(CudaFusedKernels, SoftmaxMatchesCompositeOnGpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kDtypes)
    for (const DimCase& c : {DimCase{{64, 1000}, -1}, DimCase{{3, 50, 7}, 1}}) {
      const Tensor x = on_gpu(random_normal(c.shape, dtype, 5) * 3.0);
      const Tensor z = x - logsumexp(x, {c.dim}, true);
      const Tolerance tol = fused_tolerance(dtype);
      EXPECT_TRUE(all_close(softmax(x, c.dim), exp(z), tol.rtol, tol.atol)) << label("softmax", dtype, c.shape);
      EXPECT_TRUE(all_close(log_softmax(x, c.dim), z, tol.rtol, tol.atol)) << label("log_softmax", dtype, c.shape);
    }
}

// Targets 0..classes-1 with every 7th row ignored (-100).
Tensor draw_targets(int64_t rows, int64_t classes, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> t = randint(0, classes, {rows}, kCPU, &gen).to_vector<int64_t>();
  for (int64_t r = 0; r < rows; r += 7) t[r] = -100;
  return from_vector(t, {rows});
}

TEST(CudaFusedKernels, CrossEntropyMatchesCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kDtypes)
    for (int64_t rows : {1, 3, 1000})
      for (int64_t classes : {1, 5, 1000, 50257}) {
        if (dtype == kFloat64 && rows * classes > 5'000'000) continue;  // float32 covers the largest
        const Tensor targets = draw_targets(rows, classes, 6);
        for (Reduction reduction : {Reduction::Mean, Reduction::None})
          expect_device_parity(
              [&](const std::vector<Tensor>& x) {
                return cross_entropy(x[0], to(targets, x[0].device()), -100, reduction);
              },
              {random_normal({rows, classes}, dtype, 7) * 2.0}, fused_tolerance(dtype),
              label("cross_entropy", dtype, {rows, classes}) + (reduction == Reduction::Mean ? " mean" : " none"));
      }
}

TEST(CudaFusedKernels, CrossEntropyOfStridedLogits) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor targets = from_vector(std::vector<int64_t>{3, 0, -100, 8, 2}, {5});
  for (DType dtype : kDtypes) {
    expect_device_parity(  // classes strided: copied to rows first
        [&](const std::vector<Tensor>& x) { return cross_entropy(transpose(x[0], 0, 1), to(targets, x[0].device())); },
        {random_normal({9, 5}, dtype, 8)}, fused_tolerance(dtype), "transposed logits");
    expect_device_parity(  // rows strided, classes contiguous: read in place
        [&](const std::vector<Tensor>& x) {
          return cross_entropy(slice(x[0], 1, 0, 9), to(targets, x[0].device()), -100, Reduction::Sum);
        },
        {random_normal({5, 20}, dtype, 9)}, fused_tolerance(dtype), "sliced logits");
  }
}

// The kernels' own results, lse included (the op keeps it for backward only): losses and lse from
// the forward, dlogits from the backward for the cotangent dloss, on the device of `logits`.
struct CrossEntropyResults {
  Tensor losses, lse, dlogits;
};

CrossEntropyResults cross_entropy_kernels(const Tensor& logits, const Tensor& targets, const Tensor& dloss) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  const Device device = logits.device();
  CrossEntropyResults out{empty({rows}, logits.dtype(), device), empty({rows}, logits.dtype(), device),
                          empty({rows, classes}, logits.dtype(), device)};
  const Backend& kernels = backend_for(device);
  kernels.cross_entropy(logits, to(targets, device), -100, out.losses, out.lse);
  kernels.cross_entropy_backward(logits, to(targets, device), -100, out.lse, to(dloss, device), out.dlogits);
  return out;
}

// The kernels read 16-byte packs from a row's first 16-byte boundary on, and the elements before it
// and after its last whole pack one by one; the backward stores packs where dlogits' row sits
// against 16 bytes as the logits' row does, and goes one element at a time where it does not.
// Cases: classes a multiple of 4 (8192: several tiles of packs per thread; 4100: a last tile cut
// short), not (8191 and 50257: rows start at every offset; 5, 1, 37: warp groups, a pack or none),
// and logits read as columns [offset, offset + classes) of a wider tensor, so that every row (8196
// wide) or most rows (4103, 39 wide) start off 16 bytes where dlogits' rows do not. In every case:
// ignored rows (every 7th, one of them holding a NaN), rows with a third of their logits -inf, a
// row all -inf, and a row with one NaN logit (its loss, lse and dlogits NaN).
TEST(CudaFusedKernels, CrossEntropyPackedReadsMatchCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  struct Case {
    int64_t rows, classes, offset, extra;  // logits: columns [offset, offset + classes) of classes + extra
  };
  const Case cases[] = {{64, 8192, 0, 0}, {40, 4100, 0, 0}, {33, 8191, 0, 0}, {300, 5, 0, 0},
                        {300, 1, 0, 0},   {9, 50257, 0, 0}, {20, 8192, 1, 4}, {20, 4100, 2, 3},
                        {300, 37, 1, 2}};
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  uint64_t seed = 70;
  for (DType dtype : kDtypes)
    for (const Case& c : cases) {
      const int64_t width = c.classes + c.extra;
      std::vector<double> v = random_normal({c.rows, width}, kFloat64, seed++).to_vector<double>();
      for (int64_t r = 0; r < c.rows; ++r)
        for (int64_t j = 0; j < c.classes; ++j) {
          double& x = v[r * width + c.offset + j];
          x *= 3.0;
          if ((r % 4 == 1 && (j + r) % 3 == 0) || r == 3) x = -inf;
        }
      // A NaN in a row that has finite logits (row 2), and in an ignored one (row 7).
      for (int64_t r : {2, 7})
        if (c.classes > 1 && r < c.rows) v[r * width + c.offset + c.classes / 2] = nan;
      const Tensor wide = to(from_vector(v, {c.rows, width}), dtype);
      const Tensor targets = draw_targets(c.rows, c.classes, seed++);
      const Tensor dloss = random_normal({c.rows}, dtype, seed++);
      auto logits_of = [&](const Tensor& t) { return slice(t, 1, c.offset, c.offset + c.classes); };
      const CrossEntropyResults want = cross_entropy_kernels(logits_of(wide), targets, dloss);
      const CrossEntropyResults got = cross_entropy_kernels(logits_of(on_gpu(wide)), targets, dloss);
      const std::string what = label("cross_entropy kernels", dtype, {c.rows, c.classes}) + " columns from " +
                               std::to_string(c.offset) + " of " + std::to_string(width);
      const Tolerance tol = fused_tolerance(dtype);
      EXPECT_TRUE(within(got.losses, want.losses, tol)) << what << ": losses";
      EXPECT_TRUE(within(got.lse, want.lse, tol)) << what << ": lse";
      EXPECT_TRUE(within(got.dlogits, want.dlogits, tol)) << what << ": dlogits";
      if (c.classes > 1 && c.rows > 2) {  // the row with a NaN logit
        EXPECT_TRUE(std::isnan(to(got.losses, kCPU).to_vector<double>()[2])) << what;
      }
    }
}

TEST(CudaFusedKernels, CrossEntropyRejectsOutOfRangeTargets) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor logits = on_gpu(random_normal({4, 5}, kFloat32, 10));
  // The check is read at the host's next wait for the device (cuda/deferred_checks.h): here, the
  // copy of the loss to the host.
  EXPECT_LINEA_ERROR(to(cross_entropy(logits, on_gpu(from_vector(std::vector<int64_t>{1, 5, 2, -100}, {4}))), kCPU),
                     "cross_entropy", "target 5 at row 1 is out of range for 5 classes");
  EXPECT_LINEA_ERROR(to(cross_entropy(logits, on_gpu(from_vector(std::vector<int64_t>{1, 0, -3, 7}, {4}))), kCPU),
                     "target -3 at row 2");
  // The call alone does not wait; the error comes with the first wait after it, whatever it reads.
  const Tensor unread = cross_entropy(logits, on_gpu(from_vector(std::vector<int64_t>{9, 0, 1, 2}, {4})));
  EXPECT_LINEA_ERROR(to(on_gpu(from_vector(std::vector<int64_t>{1}, {1})), kCPU), "cross_entropy", "target 9 at row 0");
  // The device is still usable afterwards.
  EXPECT_TRUE(std::isfinite(cross_entropy(logits, on_gpu(from_vector(std::vector<int64_t>{1, 0, 3, 4}, {4}))).item()));
}

TEST(CudaFusedKernels, CrossEntropyMatchesCompositeOnGpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kDtypes) {
    const Tensor x = on_gpu(random_normal({300, 1000}, dtype, 11) * 2.0);
    const std::vector<int64_t> t = draw_targets(300, 1000, 12).to_vector<int64_t>();
    std::vector<int64_t> safe(t);  // ignored rows pick class 0, then are zeroed
    std::vector<bool> ignored(t.size());
    for (size_t r = 0; r < t.size(); ++r) {
      ignored[r] = t[r] == -100;
      if (ignored[r]) safe[r] = 0;
    }
    const Tensor targets = on_gpu(from_vector(t, {300}));
    const Tensor picked = squeeze(gather(log_softmax(x, -1), 1, on_gpu(from_vector(safe, {300, 1}))), 1);
    const Tensor composite = masked_fill(-picked, on_gpu(from_vector(ignored, {300})), 0.0);
    const Tolerance tol = fused_tolerance(dtype);
    EXPECT_TRUE(all_close(cross_entropy(x, targets, -100, Reduction::None), composite, tol.rtol, tol.atol));
  }
}

struct NormCase {
  Shape x;
  bool weight, bias;
};
// Widths for each row-group size (a warp up to 1024, then 256- and 1024-thread blocks), rows of 1
// and 3 and 1000, no rows at all, and every affine combination. Widths that are whole 16-byte packs
// (up to 1024 float32, 512 float64) take the packed kernels (cuda/kernels/norm_packed.cuh) with
// 1, 2, 4 or 8 packs per lane, full or not, and chunks of rows that do not divide the rows.
const NormCase kNormCases[] = {
    {{1, 1}, true, true},     {{1, 7}, true, true},     {{3, 33}, true, false},  {{1000, 768}, true, true},
    {{5, 3000}, true, true},  {{2, 10000}, false, true}, {{0, 5}, true, true},    {{2, 3, 40}, false, false},
    {{1000, 37}, true, true}, {{70, 129}, true, true},   {{4099, 512}, true, false}, {{300, 1024}, true, true},
    {{65, 256}, false, true}, {{33, 64}, true, true},    {{17, 4}, true, true},
};

TEST(CudaFusedKernels, NormsMatchCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kDtypes)
    for (const NormCase& c : kNormCases) {
      const int64_t cols = c.x.back();
      std::vector<Tensor> inputs = {random_normal(c.x, dtype, 13) * 2.0 + 0.5};
      if (c.weight) inputs.push_back(random_normal({cols}, dtype, 14));
      if (c.bias) inputs.push_back(random_normal({cols}, dtype, 15));
      auto parts = [c](const std::vector<Tensor>& x) {
        size_t next = 1;
        const Tensor w = c.weight ? x[next++] : Tensor();
        const Tensor b = c.bias ? x[next++] : Tensor();
        return std::make_pair(w, b);
      };
      expect_device_parity(
          [parts](const std::vector<Tensor>& x) {
            const auto [w, b] = parts(x);
            return layer_norm(x[0], w, b, 1e-5);
          },
          inputs, fused_tolerance(dtype), label("layer_norm", dtype, c.x));
      if (c.bias) inputs.pop_back();  // rms_norm has no bias
      expect_device_parity(
          [c](const std::vector<Tensor>& x) { return rms_norm(x[0], c.weight ? x[1] : Tensor(), 1e-6); }, inputs,
          fused_tolerance(dtype), label("rms_norm", dtype, c.x));
    }
}

TEST(CudaFusedKernels, NormsOfStridedInput) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kDtypes) {
    expect_device_parity(
        [](const std::vector<Tensor>& x) { return layer_norm(transpose(x[0], 0, 1), x[1], x[2]); },
        {random_normal({50, 9}, dtype, 16), random_normal({50}, dtype, 17), random_normal({50}, dtype, 18)},
        fused_tolerance(dtype), "layer_norm transposed");
    expect_device_parity([](const std::vector<Tensor>& x) { return rms_norm(transpose(x[0], 0, 1), x[1]); },
                         {random_normal({50, 9}, dtype, 19), random_normal({50}, dtype, 20)}, fused_tolerance(dtype),
                         "rms_norm transposed");
    // Contiguous rows of whole packs that start one element past 16 bytes: not the packed kernels.
    const auto off_by_one = [](const Tensor& flat) { return reshape(narrow(flat, 0, 1, 40 * 64), {40, 64}); };
    expect_device_parity(
        [&](const std::vector<Tensor>& x) { return layer_norm(off_by_one(x[0]), x[1], x[2]); },
        {random_normal({40 * 64 + 1}, dtype, 28), random_normal({64}, dtype, 29), random_normal({64}, dtype, 30)},
        fused_tolerance(dtype), "layer_norm of rows off 16 bytes");
    expect_device_parity([&](const std::vector<Tensor>& x) { return rms_norm(off_by_one(x[0]), x[1]); },
                         {random_normal({40 * 64 + 1}, dtype, 31), random_normal({64}, dtype, 32)},
                         fused_tolerance(dtype), "rms_norm of rows off 16 bytes");
  }
}

// x feeds the norm and a later addition (a pre-norm block's residual stream): the norm's backward
// adds the addition's gradient for x in its own pass, in the packed kernel (512, 1024 float32 wide)
// or after the element-per-lane one (33 wide).
TEST(CudaFusedKernels, NormsAddTheResidualStreamsGradient) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kDtypes)
    for (int64_t cols : {512, 1024, 33}) {
      const std::vector<Tensor> inputs = {random_normal({70, cols}, dtype, 33), random_normal({cols}, dtype, 34),
                                          random_normal({cols}, dtype, 35)};
      expect_device_parity([](const std::vector<Tensor>& x) { return rms_norm(x[0], x[1]) * 1.5 + x[0]; },
                           {inputs[0], inputs[1]}, fused_tolerance(dtype), label("rms_norm + x", dtype, {70, cols}));
      expect_device_parity(
          [](const std::vector<Tensor>& x) { return layer_norm(x[0], x[1], x[2]) - x[0] * 0.25; }, inputs,
          fused_tolerance(dtype), label("layer_norm - x / 4", dtype, {70, cols}));
    }
}

TEST(CudaFusedKernels, NormsMatchCompositeOnGpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kDtypes) {
    const Tensor x = on_gpu(random_normal({300, 257}, dtype, 21));
    const Tensor w = on_gpu(random_normal({257}, dtype, 22)), b = on_gpu(random_normal({257}, dtype, 23));
    const Tensor centred = x - mean(x, {-1}, true);
    const Tensor ln = centred * rsqrt(mean(centred * centred, {-1}, true) + 1e-5) * w + b;
    const Tensor rms = x * rsqrt(mean(x * x, {-1}, true) + 1e-6) * w;
    const Tolerance tol = fused_tolerance(dtype);
    EXPECT_TRUE(all_close(layer_norm(x, w, b, 1e-5), ln, tol.rtol, tol.atol)) << dtype_name(dtype);
    EXPECT_TRUE(all_close(rms_norm(x, w, 1e-6), rms, tol.rtol, tol.atol)) << dtype_name(dtype);
  }
}

// dweight and dbias are sums over rows: per-chunk partials added in a fixed order, never atomics,
// so two runs agree bit for bit.
TEST(CudaFusedKernels, NormParameterGradientsAreDeterministic) {
  LINEA_SKIP_WITHOUT_CUDA();
  Tensor x = on_gpu(random_normal({4099, 768}, kFloat32, 24)), w = on_gpu(random_normal({768}, kFloat32, 25)),
         b = on_gpu(random_normal({768}, kFloat32, 26));
  w.requires_grad_(true);
  b.requires_grad_(true);
  const Tensor u = on_gpu(random_normal({4099, 768}, kFloat32, 27));
  const auto first = grad(sum(layer_norm(x, w, b) * u), {w, b});
  const auto second = grad(sum(layer_norm(x, w, b) * u), {w, b});
  EXPECT_TRUE(same_values(first[0], second[0]));
  EXPECT_TRUE(same_values(first[1], second[1]));
  const auto rms_first = grad(sum(rms_norm(x, w) * u), {w});
  const auto rms_second = grad(sum(rms_norm(x, w) * u), {w});
  EXPECT_TRUE(same_values(rms_first[0], rms_second[0]));
}

// RoPE: (B, H, T, dh) inputs read in place from the attention layer's (B, T, H, dh) layout, and
// contiguous ones; partial rotation; head dims and lengths that are not multiples of 32; halves
// of whole groups of 4 (the packed kernel) at 64 and at 8 dims.
TEST(CudaFusedKernels, RotaryEmbeddingMatchesCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  struct Case {
    Shape x;  // as the leaf is drawn
    int64_t half;
    bool heads_last;
  };
  const Case cases[] = {{{2, 37, 3, 64}, 32, true}, {{3, 5, 33, 10}, 4, false}, {{1, 1000, 2, 6}, 3, true},
                        {{7, 9}, 4, false},          {{3, 5, 33, 8}, 4, false},  {{2, 19, 5, 8}, 4, true}};
  for (DType dtype : kDtypes)
    for (const Case& c : cases) {
      const int64_t length = c.heads_last ? c.x[1] : c.x[c.x.size() - 2];
      const Tensor angles = random_normal({length, c.half}, dtype, 30) * 50.0;
      const Tensor cos = linea::cos(angles), sin = linea::sin(angles);
      expect_device_parity(
          [&](const std::vector<Tensor>& x) {
            const Tensor seen = c.heads_last ? transpose(x[0], 1, 2) : x[0];
            return rotary_embedding(seen, to(cos, x[0].device()), to(sin, x[0].device()));
          },
          {random_normal(c.x, dtype, 31)}, fused_tolerance(dtype), label("rotary_embedding", dtype, c.x));
    }
}

// ---- ReGLA's fused maps ----------------------------------------------------------------------

Tensor normalized_exp_results(const std::vector<Tensor>& x, NormalizedExpMode mode, double scale, bool heads_last) {
  const Tensor seen = heads_last ? transpose(x[0], 1, 2) : x[0];
  const NormalizedExp out = normalized_exp(seen, mode, scale, x.size() > 1 ? x[1] : Tensor());
  return cat({flatten(out.features), flatten(out.max)}, 0);
}

std::string map_label(NormalizedExpMode mode, DType dtype, const Shape& x, bool heads_last, bool previous) {
  return label(mode == NormalizedExpMode::RowMax ? "normalized_exp RowMax" : "normalized_exp PrefixMax", dtype, x) +
         (heads_last ? " heads last" : "") + (previous ? " with previous" : "");
}

// Lengths below, at and across a warp and the prefix scan's tile of 512 rows; feature widths
// below, at and across a warp's 32 lanes; half the sizes read (B, T, H, d) leaves seen as
// (B, H, T, d); PrefixMax with and without a previous running max (drawn to win the first rows).
TEST(CudaFusedKernels, NormalizedExpMatchesCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  const int64_t B = 2, H = 3;
  for (DType dtype : kDtypes)
    for (NormalizedExpMode mode : {NormalizedExpMode::RowMax, NormalizedExpMode::PrefixMax})
      for (int64_t T : {1, 17, 64, 65, 512, 513, 1000})
        for (int64_t d : {1, 16, 33, 64, 100}) {
          const bool heads_last = (T + d) % 2 == 1;
          const bool previous = mode == NormalizedExpMode::PrefixMax && T % 2 == 1;
          const Shape leaf = heads_last ? Shape{B, T, H, d} : Shape{B, H, T, d};
          std::vector<Tensor> inputs = {random_normal(leaf, dtype, 40) * 2.0};
          if (previous) inputs.push_back(random_normal({B, H, 1, 1}, dtype, 41) * 0.5 + 5.0);
          expect_device_parity(
              [=](const std::vector<Tensor>& x) { return normalized_exp_results(x, mode, 0.3, heads_last); }, inputs,
              fused_tolerance(dtype), map_label(mode, dtype, leaf, heads_last, previous));
        }
}

// Features strided (the op copies them to rows first); many short sequences, more than the
// prefix kernel's blocks, so each block takes several sequences in turn.
TEST(CudaFusedKernels, NormalizedExpOfStridedInputsAndManySequences) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kDtypes)
    for (NormalizedExpMode mode : {NormalizedExpMode::RowMax, NormalizedExpMode::PrefixMax}) {
      expect_device_parity(
          [mode](const std::vector<Tensor>& x) {
            return normalized_exp_results({transpose(x[0], 2, 3)}, mode, 1.0, false);
          },
          {random_normal({2, 3, 37, 70}, dtype, 42)}, fused_tolerance(dtype), "features strided");
      // Many (batch, head) sequences, so a block takes several; previous goes with PrefixMax only.
      std::vector<Tensor> inputs = {random_normal({64, 40, 5, 8}, dtype, 43)};
      if (mode == NormalizedExpMode::PrefixMax) inputs.push_back(random_normal({64, 40, 1, 1}, dtype, 44) + 1.5);
      expect_device_parity(
          [mode](const std::vector<Tensor>& x) { return normalized_exp_results(x, mode, 1.0, false); }, inputs,
          fused_tolerance(dtype), mode == NormalizedExpMode::RowMax ? "many rows" : "many sequences");
    }
}

// Whole numbers in [-4, 4]: ties everywhere, within tokens, across positions and with previous.
// The GPU must pick the same holders as the CPU: the first feature, the earliest position,
// previous before any position.
TEST(CudaFusedKernels, NormalizedExpBreaksTiesAsTheCpuDoes) {
  LINEA_SKIP_WITHOUT_CUDA();
  auto whole = [](const Shape& shape, uint64_t seed) {
    std::vector<double> v = random_normal(shape, kFloat64, seed).to_vector<double>();
    for (double& e : v) e = std::max(-4.0, std::min(4.0, std::round(2.0 * e)));
    return from_vector(v, shape);
  };
  for (DType dtype : kDtypes)
    for (NormalizedExpMode mode : {NormalizedExpMode::RowMax, NormalizedExpMode::PrefixMax})
      for (int64_t T : {40, 700}) {
        std::vector<Tensor> inputs = {to(whole({2, 3, T, 45}, 45), dtype)};
        if (mode == NormalizedExpMode::PrefixMax) inputs.push_back(to(whole({2, 3, 1, 1}, 46) + 1.0, dtype));
        expect_device_parity(
            [mode](const std::vector<Tensor>& x) { return normalized_exp_results(x, mode, 1.0, false); }, inputs,
            fused_tolerance(dtype), map_label(mode, dtype, {2, 3, T, 45}, false, inputs.size() > 1) + " ties");
      }
}

// The same numbers, NaN for NaN, and the same sign of every zero: a max is one of its operands,
// the first of equal ones (-0 and +0 are equal), so the GPU must return the CPU's bits.
::testing::AssertionResult same_maxima(const Tensor& gpu, const Tensor& cpu) {
  const auto a = to(gpu, kCPU).to_vector<double>(), e = cpu.to_vector<double>();
  if (a.size() != e.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    const bool same = std::isnan(e[i]) ? std::isnan(a[i]) : a[i] == e[i] && std::signbit(a[i]) == std::signbit(e[i]);
    if (!same)
      return ::testing::AssertionFailure() << "max " << i << ": " << a[i] << " vs expected " << e[i];
  }
  return ::testing::AssertionSuccess();
}

// The kernels' tiles and turns (cuda/kernels/normalized_exp.cu): the scans along time take 512
// rows at a time (T = 511, 512, 513, 3 * 512 + 5); the row passes give a row 1 to 32 lanes, so a
// warp takes 1 to 32 rows at once (d = 4, 8: several rows per warp; 64; 128 in float32: one warp,
// one load per lane; 7 and 129: one float per load; 256: a row in two segments); one (b, h)
// sequence, and 2050 of them (each scan block takes several in turn); PrefixMax with and without
// previous. Inputs are normal draws, and whole numbers in [-4, 0] with zeros of both signs, so
// that maxima tie within rows, across positions and with previous.
TEST(CudaFusedKernels, NormalizedExpAcrossTilesAndSequenceCounts) {
  LINEA_SKIP_WITHOUT_CUDA();
  struct Case {
    int64_t B, H, T, d;
    bool heads_last;
  };
  const Case cases[] = {{1, 1, 511, 64, false},  {1, 1, 512, 64, true},  {1, 1, 513, 64, false},
                        {1, 1, 1541, 64, true},  {1, 1, 1541, 7, false}, {1, 1, 513, 129, true},
                        {1, 1, 40, 256, false},  {1, 1, 300, 128, false}, {41, 50, 1, 64, false},
                        {41, 50, 5, 8, true},    {41, 50, 513, 4, false}};
  auto non_positive_whole = [](const Shape& shape, uint64_t seed) {
    std::vector<double> v = random_normal(shape, kFloat64, seed).to_vector<double>();
    for (double& e : v) e = std::min(std::max(-4.0, std::round(2.0 * e)), 0.0);  // round(-0.3) = -0
    return from_vector(v, shape);
  };
  uint64_t seed = 60;
  for (DType dtype : kDtypes)
    for (NormalizedExpMode mode : {NormalizedExpMode::RowMax, NormalizedExpMode::PrefixMax})
      for (bool previous : {false, true})
        for (bool ties : {false, true})
          for (const Case& c : cases) {
            if (previous && mode == NormalizedExpMode::RowMax) continue;
            const Shape leaf = c.heads_last ? Shape{c.B, c.T, c.H, c.d} : Shape{c.B, c.H, c.T, c.d};
            std::vector<Tensor> inputs = {ties ? to(non_positive_whole(leaf, seed), dtype)
                                               : random_normal(leaf, dtype, seed) * 2.0};
            if (previous)
              inputs.push_back(ties ? to(non_positive_whole({c.B, c.H, 1, 1}, seed + 1), dtype)
                                    : random_normal({c.B, c.H, 1, 1}, dtype, seed + 1) * 0.5 + 5.0);
            seed += 2;
            const bool heads_last = c.heads_last;
            const std::string what = map_label(mode, dtype, leaf, heads_last, previous) + (ties ? " ties" : "");
            // The gradient reaching a running max is a sum over up to T rows (a scan tree on the
            // GPU, time order on the CPU) of terms of order one that largely cancel: float32's
            // difference between the two orders grows like sqrt(T) rounding units.
            Tolerance tol = fused_tolerance(dtype);
            if (dtype == kFloat32) tol.atol *= std::sqrt(static_cast<double>(c.T) / 64.0);
            expect_device_parity(
                [=](const std::vector<Tensor>& x) { return normalized_exp_results(x, mode, 0.3, heads_last); }, inputs,
                tol, what);
            auto maxima = [&](const Tensor& x, const Tensor& prev) {
              return normalized_exp(heads_last ? transpose(x, 1, 2) : x, mode, 0.3, prev).max;
            };
            EXPECT_TRUE(same_maxima(maxima(on_gpu(inputs[0]), previous ? on_gpu(inputs[1]) : Tensor()),
                                    maxima(inputs[0], previous ? inputs[1] : Tensor())))
                << what;
            if (mode == NormalizedExpMode::PrefixMax) {
              // Without a gradient the scan kernel also writes each sequence's last max, into
              // memory of its own (what a decoding state keeps).
              const NoGradGuard no_grad;
              const Tensor x = on_gpu(inputs[0]);
              const NormalizedExp out =
                  normalized_exp(heads_last ? transpose(x, 1, 2) : x, mode, 0.3, previous ? on_gpu(inputs[1]) : Tensor());
              EXPECT_EQ(out.last_max.storage()->nbytes(), static_cast<size_t>(c.B * c.H) * dtype_size(dtype)) << what;
              EXPECT_TRUE(same_maxima(out.last_max, narrow(out.max, 2, c.T - 1, 1))) << what;
            }
          }
}

TEST(CudaFusedKernels, NormalizedExpMatchesCompositeOnGpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kDtypes) {
    const Tensor x = on_gpu(random_normal({2, 3, 300, 64}, dtype, 47) * 2.0);
    const Tensor mu = amax(x, {-1}, true);
    const Tolerance tol = fused_tolerance(dtype);
    const NormalizedExp rows = normalized_exp(x, NormalizedExpMode::RowMax, 0.5);
    EXPECT_TRUE(all_close(rows.features, exp(x - mu) * 0.5, tol.rtol, tol.atol)) << dtype_name(dtype);
    EXPECT_TRUE(all_close(rows.max, mu, 0, 0)) << dtype_name(dtype);
    // The running max of the token maxima, from the CPU's cumulative loop.
    std::vector<double> m = to(mu, kCPU).to_vector<double>();
    for (size_t i = 1; i < m.size(); ++i)
      if (i % 300 != 0) m[i] = std::max(m[i], m[i - 1]);
    const Tensor running = on_gpu(to(from_vector(m, mu.shape()), dtype));
    const NormalizedExp keys = normalized_exp(x, NormalizedExpMode::PrefixMax);
    EXPECT_TRUE(all_close(keys.max, running, 0, 0)) << dtype_name(dtype);
    EXPECT_TRUE(all_close(keys.features, exp(x - running), tol.rtol, tol.atol)) << dtype_name(dtype);
  }
}

// The refined gate: floors that hold for none, some and all entries; pre-activations of a few
// units and of thousands; (B, T, H, dv) leaves seen as (B, H, T, dv).
TEST(CudaFusedKernels, RefinedLogGateMatchesCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  struct Case {
    Shape shape;
    bool heads_last;
  };
  const Case cases[] = {{{1}, false}, {{3, 7}, false}, {{2, 65, 3, 33}, true}, {{4, 1000, 2, 16}, true}, {{0, 4}, false}};
  for (DType dtype : kDtypes)
    for (const Case& c : cases)
      for (double floor : {-20.0, -2.5, -std::numeric_limits<double>::infinity()})
        for (double scale : {3.0, 3000.0}) {
          const bool heads_last = c.heads_last;
          expect_device_parity(
              [heads_last, floor](const std::vector<Tensor>& x) {
                auto seen = [heads_last](const Tensor& t) { return heads_last ? transpose(t, 1, 2) : t; };
                return refined_log_gate(seen(x[0]), seen(x[1]), floor);
              },
              {random_normal(c.shape, dtype, 48) * scale, random_normal(c.shape, dtype, 49) * scale},
              fused_tolerance(dtype),
              label("refined_log_gate", dtype, c.shape) + " floor " + std::to_string(floor) + " scale " +
                  std::to_string(scale));
        }
}

// With the ReGLA gate's biases, (H, 1, dv) against (B, T, H, dv) leaves seen as (B, H, T, dv):
// rows of H dv channels, which the kernels take 16 bytes at a time where H dv allows (32 and 256
// channels here) and one element at a time where it does not (99, 1).
TEST(CudaFusedKernels, RefinedLogGateWithBiasesMatchesCpu) {
  LINEA_SKIP_WITHOUT_CUDA();
  for (DType dtype : kDtypes)
    for (const Shape& shape : {Shape{2, 65, 3, 33}, Shape{4, 1000, 2, 16}, Shape{2, 130, 4, 64}, Shape{1, 1, 1, 1}})
      for (double floor : {-20.0, -2.5}) {
        const Shape bias{shape[2], 1, shape[3]};
        expect_device_parity(
            [floor](const std::vector<Tensor>& x) {
              return refined_log_gate(transpose(x[0], 1, 2), transpose(x[1], 1, 2), floor, x[2], x[3]);
            },
            {random_normal(shape, dtype, 53) * 3.0, random_normal(shape, dtype, 54) * 3.0,
             random_normal(bias, dtype, 55), random_normal(bias, dtype, 56)},
            fused_tolerance(dtype), label("refined_log_gate with biases", dtype, shape) + " floor " + std::to_string(floor));
      }
}

TEST(CudaFusedKernels, FusedMapsRejectMixedDevices) {
  LINEA_SKIP_WITHOUT_CUDA();
  const Tensor x = on_gpu(random_normal({1, 2, 3, 4}, kFloat32, 50));
  EXPECT_LINEA_ERROR(normalized_exp(x, NormalizedExpMode::PrefixMax, 1.0, random_normal({1, 2, 1, 1}, kFloat32, 51)),
                     "normalized_exp", "different devices");
  EXPECT_LINEA_ERROR(refined_log_gate(x, random_normal({1, 2, 3, 4}, kFloat32, 52), -20.0), "refined_log_gate",
                     "different devices");
}

}  // namespace
}  // namespace linea::testing
