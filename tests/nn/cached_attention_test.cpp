// cached_attention_step (autograd/ops.h), the decoding token of softmax attention over a KV cache
// kept in place, against an oracle written here from the contract (tensor/backend_kernels.def)
// with plain loops in double: the output, the column written into the cache (and nothing else
// written), and the positions advanced, for grouped queries, partial and no rotation, caches that
// have wrapped (a sliding window's ring) and rows at different positions. Also: a position past
// the RoPE tables gives NaN in its row only, and bad inputs are named errors. And
// cached_attention_projected: the same step followed by fused_linear, bit for bit on the CPU.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/nn/cached_attention_inputs.h"

namespace linea::testing {
namespace {

using Case = CachedAttentionCase;
using Inputs = CachedAttentionInputs;

Inputs draw(const Case& c, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return draw_cached_attention(c, dtype, gen);
}

// The contract, in double: returns out (B, H, dh) and fills the expected caches.
std::vector<double> oracle(const Case& c, const Inputs& in, std::vector<double>& ck, std::vector<double>& cv) {
  const auto q = in.q.to_vector<double>(), k = in.k.to_vector<double>(), v = in.v.to_vector<double>();
  const auto co = c.half ? in.cos.to_vector<double>() : std::vector<double>();
  const auto si = c.half ? in.sin.to_vector<double>() : std::vector<double>();
  ck = in.cache_k.to_vector<double>();
  cv = in.cache_v.to_vector<double>();
  auto rotate = [&](const double* x, int64_t p) {
    std::vector<double> y(x, x + c.dh);
    for (int64_t i = 0; i < c.half; ++i) {
      const double cs = co[p * c.half + i], sn = si[p * c.half + i];
      y[i] = x[i] * cs - x[i + c.half] * sn;
      y[i + c.half] = x[i + c.half] * cs + x[i] * sn;
    }
    return y;
  };
  const int64_t group = c.heads / c.kv_heads;
  std::vector<double> out(static_cast<size_t>(c.batch * c.heads * c.dh));
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t p = c.positions[b], column = p % c.columns, seen = std::min(p + 1, c.columns);
    const bool past = c.half > 0 && p >= c.table;
    for (int64_t j = 0; j < c.kv_heads && !past; ++j) {
      const std::vector<double> kr = rotate(&k[(b * c.kv_heads + j) * c.dh], p);
      for (int64_t d = 0; d < c.dh; ++d) {
        ck[((b * c.kv_heads + j) * c.columns + column) * c.dh + d] = kr[d];
        cv[((b * c.kv_heads + j) * c.columns + column) * c.dh + d] = v[(b * c.kv_heads + j) * c.dh + d];
      }
    }
    for (int64_t h = 0; h < c.heads; ++h) {
      double* o = &out[(b * c.heads + h) * c.dh];
      if (past) {
        std::fill(o, o + c.dh, std::numeric_limits<double>::quiet_NaN());
        continue;
      }
      const std::vector<double> qr = rotate(&q[(b * c.heads + h) * c.dh], p);
      const int64_t base = (b * c.kv_heads + h / group) * c.columns;
      std::vector<double> scores(static_cast<size_t>(seen));
      for (int64_t s = 0; s < seen; ++s) {
        for (int64_t d = 0; d < c.dh; ++d) scores[s] += qr[d] * ck[(base + s) * c.dh + d];
        scores[s] /= std::sqrt(static_cast<double>(c.dh));
      }
      const double top = *std::max_element(scores.begin(), scores.end());
      double total = 0;
      for (double& s : scores) total += (s = std::exp(s - top));
      for (int64_t s = 0; s < seen; ++s)
        for (int64_t d = 0; d < c.dh; ++d) o[d] += scores[s] / total * cv[(base + s) * c.dh + d];
    }
  }
  return out;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      // grouped queries, partial rotation, one row wrapped around a 5-column ring
      {3, 4, 2, 6, 2, 5, 16, {0, 3, 11}},
      // no rotation, rows far apart
      {2, 3, 3, 7, 0, 9, 0, {8, 2}},
      // one column: only the newest token is seen
      {1, 2, 1, 8, 4, 1, 8, {4}},
      // multi-query (one K/V head), whole-head rotation, long cache
      {2, 4, 1, 10, 5, 300, 400, {299, 137}},
  };
  return all;
}

TEST(CachedAttentionStep, MatchesTheContract) {
  NoGradGuard no_grad;
  for (DType dtype : {kFloat64, kFloat32}) {
    const double tol = dtype == kFloat64 ? 1e-12 : 2e-5;
    for (size_t i = 0; i < cases().size(); ++i) {
      const Case& c = cases()[i];
      Inputs in = draw(c, dtype, 10 + i);
      std::vector<double> want_k, want_v;
      const std::vector<double> want = oracle(c, in, want_k, want_v);
      const Tensor out = run_cached_attention(in);
      const Shape out_shape{c.batch, c.heads, c.dh};
      EXPECT_TRUE(all_close(out, from_vector(want, out_shape), tol, tol)) << "case " << i << " " << dtype_name(dtype);
      EXPECT_TRUE(all_close(in.cache_k, from_vector(want_k, in.cache_k.shape()), tol, tol)) << "case " << i;
      EXPECT_TRUE(all_close(in.cache_v, from_vector(want_v, in.cache_v.shape()), tol, tol)) << "case " << i;
      std::vector<int64_t> advanced = c.positions;
      for (int64_t& p : advanced) ++p;
      EXPECT_EQ(in.positions.to_vector<int64_t>(), advanced) << "case " << i;
    }
  }
}

TEST(CachedAttentionStep, PastTheTablesIsNaNInThatRowOnly) {
  NoGradGuard no_grad;
  const Case c{2, 2, 2, 4, 2, 8, 5, {5, 4}};  // row 0 at position 5 of a 5-row table
  Inputs in = draw(c, kFloat64, 3);
  const Tensor out = run_cached_attention(in);
  const auto values = out.to_vector<double>();
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_EQ(std::isnan(values[i]), i < values.size() / 2) << "element " << i;
}

TEST(CachedAttentionStep, BadInputsAreNamedErrors) {
  const Case c{2, 4, 2, 6, 3, 5, 16, {1, 2}};
  Inputs in = draw(c, kFloat64, 4);
  auto call = [&](const Inputs& x) {
    Inputs y = x;
    return run_cached_attention(y);
  };
  {
    Inputs bad = in;
    bad.k = randn({2, 4, 6}, kFloat64);
    EXPECT_LINEA_ERROR(call(bad), "cached_attention_step", "k must have shape [2, 2, 6]");
  }
  {
    Inputs bad = in;
    bad.positions = from_vector<double>({1, 2}, {2});
    EXPECT_LINEA_ERROR(call(bad), "cached_attention_step", "positions must be Int64");
  }
  {
    Inputs bad = in;
    bad.cache_v = transpose(randn({2, 2, 6, 5}, kFloat64), 2, 3);
    EXPECT_LINEA_ERROR(call(bad), "cached_attention_step", "cache_v", "contiguous");
  }
  {
    Inputs bad = in;
    bad.sin = Tensor();
    EXPECT_LINEA_ERROR(call(bad), "cached_attention_step", "both tables");
  }
  {
    Inputs bad = in;
    bad.cos = randn({16, 4}, kFloat64);
    bad.sin = bad.cos;
    EXPECT_LINEA_ERROR(call(bad), "cached_attention_step", "2 half <= dh = 6");
  }
  {
    Inputs bad = in;
    bad.cache_k = randn({2, 3, 5, 6}, kFloat64);
    EXPECT_LINEA_ERROR(call(bad), "cached_attention_step", "3 K/V heads must divide");
  }
  {
    Inputs bad = in;
    bad.q = to(in.q, kFloat32);
    EXPECT_LINEA_ERROR(call(bad), "cached_attention_step", "different dtypes");
  }
  {
    Inputs bad = in;
    bad.cache_v = bad.cache_k;
    EXPECT_LINEA_ERROR(call(bad), "cached_attention_step", "must not share memory");
  }
  {
    Inputs bad = in;
    bad.q = clone(in.q).requires_grad_(true);
    EXPECT_LINEA_ERROR(call(bad), "cached_attention_step", "has no backward");
  }
}

TEST(CachedAttentionProjected, IsTheStepThenTheProduct) {
  NoGradGuard no_grad;
  // Row 2 of the first wrapped around the 9 columns; the second has more rows than fused_linear's
  // kernel takes (kFusedLinearMaxRows), so its product is the composite one.
  const std::vector<Case> cases = {{3, 4, 2, 6, 2, 9, 32, {0, 8, 20}}, {6, 2, 1, 8, 4, 5, 32, {0, 1, 2, 3, 9, 30}}};
  for (const Case& c : cases) {
    for (DType dtype : {kFloat64, kFloat32}) {
      for (const bool bias : {true, false}) {
        for (const bool residual : {true, false}) {
          const std::string name = std::to_string(c.batch) + " rows " + dtype_name(dtype) + (bias ? " bias" : "") +
                                   (residual ? " residual" : "");
          Inputs fused = draw(c, dtype, 5), apart = draw(c, dtype, 5);
          Generator gen(6);
          const AttentionProjection p = draw_projection(c.batch, c.heads * c.dh, 7, bias, residual, dtype, gen);
          const Tensor got = run_projected(fused, p);
          const Tensor heads = reshape(run_cached_attention(apart), {c.batch, c.heads * c.dh});
          const Tensor want =
              fused_linear({.x = heads, .weight = p.weight, .bias = p.bias, .residual = p.residual}, {});
          EXPECT_EQ(max_abs_diff(got, want), 0.0) << name;
          EXPECT_EQ(max_abs_diff(fused.cache_k, apart.cache_k), 0.0) << name;
          EXPECT_EQ(max_abs_diff(fused.cache_v, apart.cache_v), 0.0) << name;
          EXPECT_EQ(fused.positions.to_vector<int64_t>(), apart.positions.to_vector<int64_t>()) << name;
        }
      }
    }
  }
}

TEST(CachedAttentionProjected, BadProjectionsAreNamedErrors) {
  NoGradGuard no_grad;
  const Case c{2, 4, 2, 6, 3, 5, 16, {1, 2}};
  Inputs in = draw(c, kFloat64, 7);
  Generator gen(8);
  const AttentionProjection good = draw_projection(c.batch, c.heads * c.dh, 7, true, true, kFloat64, gen);
  auto call = [&](const AttentionProjection& p) {
    Inputs x = in;
    return run_projected(x, p);
  };
  {
    AttentionProjection bad = good;
    bad.weight = randn({7, 23}, kFloat64);
    EXPECT_LINEA_ERROR(call(bad), "cached_attention_projected", "weight must be (out, H dh = 24)");
  }
  {
    AttentionProjection bad = good;
    bad.bias = randn({6}, kFloat64);
    EXPECT_LINEA_ERROR(call(bad), "cached_attention_projected", "bias must have shape [7]");
  }
  {
    AttentionProjection bad = good;
    bad.residual = randn({2, 6}, kFloat64);
    EXPECT_LINEA_ERROR(call(bad), "cached_attention_projected", "residual must have shape [2, 7]");
  }
  {
    AttentionProjection bad = good;
    bad.weight = randn({7, 24}, kFloat32);
    EXPECT_LINEA_ERROR(call(bad), "cached_attention_projected", "different dtypes");
  }
  {
    Inputs bad = in;
    bad.k = randn({2, 4, 6}, kFloat64);
    EXPECT_LINEA_ERROR(run_projected(bad, good), "cached_attention_projected", "k must have shape [2, 2, 6]");
  }
}

}  // namespace
}  // namespace linea::testing
