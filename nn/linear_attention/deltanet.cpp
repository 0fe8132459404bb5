// DeltaNet (deltanet.h): the delta rule in its chunked and recurrent forms, and the layer around
// them. Everything is composite: gradients come from the ops' own backward.
//
// Shapes: B batch, H heads, T time, dk key dim, dv value dim; the chunked form cuts T into N
// chunks of C.
#include "nn/linear_attention/deltanet.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "nn/layers/check.h"
#include "nn/names.h"
#include "tensor/error.h"

namespace linea::nn::linear {

namespace {

// ---- checks ------------------------------------------------------------------------------------

// Ranks, sizes, dtypes and devices. The sequence form passes (B, H, T, .) tensors (rank 4), the
// step (B, H, .) ones (rank 3); the state is (B, H, dv, dk) either way.
void check_inputs(const char* op, int64_t rank, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta,
                  const Tensor& state) {
  LINEA_CHECK(q.defined() && k.defined() && v.defined() && beta.defined(), op, "q, k, v and beta must be defined");
  LINEA_CHECK(is_floating(q.dtype()), op, "expects float32 or float64 inputs, got q ", q.describe());
  LINEA_CHECK(q.dim() == rank && v.dim() == rank, op, "q and v must have ", rank, " dims (",
              rank == 4 ? "B, H, T, d" : "B, H, d", "), got ", q.describe(), " and ", v.describe());
  const Shape lead(q.shape().begin(), q.shape().end() - 1);
  auto check = [&](const char* name, const Tensor& x, const Shape& expected) {
    LINEA_CHECK(x.dtype() == q.dtype() && x.device() == q.device(), op, name, " ", x.describe(),
                " differs in dtype or device from q ", q.describe());
    LINEA_CHECK(x.shape() == expected, op, name, " must be ", shape_str(expected), " to fit q ", q.describe(),
                ", got ", x.describe());
  };
  auto with_last = [&](int64_t last) {
    Shape s = lead;
    s.push_back(last);
    return s;
  };
  check("k", k, q.shape());
  check("v", v, with_last(v.size(-1)));
  check("beta", beta, with_last(1));
  if (state.defined()) check("state", state, {q.size(0), q.size(1), v.size(-1), q.size(-1)});
}

bool is_power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// x (B, H, T, d) padded with zeros to (B, H, N * C, d) and seen as (B, H, N, C, d). A padded
// token has k = 0 and beta = 0, so it changes nothing (w = u = 0, and its row of the matrix
// inverted below is the identity's); its outputs are dropped.
Tensor to_chunks(const Tensor& x, int64_t n_chunks, int64_t chunk) {
  const int64_t pad = n_chunks * chunk - x.size(2);
  const Tensor padded =
      pad == 0 ? x : cat({x, zeros({x.size(0), x.size(1), pad, x.size(3)}, {x.dtype(), x.device()})}, 2);
  return reshape(padded, {x.size(0), x.size(1), n_chunks, chunk, x.size(3)});
}

// The N slices x[:, :, n] of a (B, H, N, ...) tensor. Each slice's backward makes a gradient of
// the whole tensor's size, so N slices straight out of x would cost O(N^2) there; cutting groups
// of about sqrt(N) chunks first, then the chunks of each group, costs O(N^1.5).
std::vector<Tensor> chunk_slices(const Tensor& x) {
  const int64_t N = x.size(2);
  const auto group = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(N))));
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(N));
  for (int64_t first = 0; first < N; first += group) {
    const int64_t size = std::min(group, N - first);
    const Tensor g = narrow(x, 2, first, size);
    for (int64_t i = 0; i < size; ++i) out.push_back(select(g, 2, i));
  }
  return out;
}

// ---- the inverse of I + tril(diag(beta) K K^T, -1) ------------------------------------------------
//
// k (..., C, dk), beta (..., C, 1), C a power of two. Returns M^{-1} (..., C, C) for
//   M = I + tril(diag(beta) K K^T, -1)                 (unit lower triangular),
// exactly (no truncated series), by block forward substitution with doubling block sizes. A unit
// lower-triangular matrix split into halves,
//   M = [[M_a, 0], [B, M_d]]   has   M^{-1} = [[M_a^{-1}, 0], [-M_d^{-1} B M_a^{-1}, M_d^{-1}]]
// (multiply out: the lower-left block is B M_a^{-1} - M_d M_d^{-1} B M_a^{-1} = 0), and M_a, M_d
// have the same form over their halves of the tokens. So from the inverses of all diagonal blocks
// of size s (1 x 1 blocks: 1) those of size 2s follow, for every pair at once, by two batched
// matmuls; log2(C) rounds. The lower-left block B needs no masking: every row of the second half
// comes after every column of the first, so B = diag(beta_d) K_d K_a^T.
//
// Why not the Neumann product (I - A)(I + A^2)(I + A^4)... (A the strictly lower part)? It is
// exact in exact arithmetic, but A^(2^j) can have huge entries that cancel in the product (with
// beta = 1 and nearly equal keys, entries of A^32 reach binomial(63, 31) ~ 1e18 for C = 64), so in
// float32 it is not. Block substitution only ever forms blocks of M^{-1} itself, which stay
// moderate: M^{-1} diag(beta) K = W, whose rows have norm <= 1 for |k| <= 1 and beta in (0, 1).
Tensor inverse_unit_lower(const Tensor& k, const Tensor& beta) {
  const int64_t C = k.size(-2), dk = k.size(-1);
  const Shape lead(k.shape().begin(), k.shape().end() - 2);
  auto shape_of = [&](std::initializer_list<int64_t> tail) {
    Shape s = lead;
    s.insert(s.end(), tail);
    return s;
  };
  Tensor inv = ones(shape_of({C, 1, 1}), {k.dtype(), k.device()});  // (..., C / s, s, s) with s = 1
  for (int64_t s = 1; s < C; s *= 2) {
    const int64_t pairs = C / (2 * s);
    // (..., C, w) -> the first and second halves of each pair of blocks, (..., pairs, s, w).
    auto halves = [&](const Tensor& x, int64_t w) {
      const Tensor paired = reshape(x, shape_of({pairs, 2, s, w}));
      return std::pair{select(paired, -3, 0), select(paired, -3, 1)};
    };
    const auto [inv_a, inv_d] = halves(reshape(inv, shape_of({C, s})), s);
    const auto [k_a, k_d] = halves(k, dk);
    const Tensor beta_d = halves(beta, 1).second;
    const Tensor lower_left = beta_d * matmul(k_d, transpose(k_a, -1, -2));               // B, (..., pairs, s, s)
    const Tensor inv_lower_left = neg(matmul(inv_d, matmul(lower_left, inv_a)));         // -M_d^-1 B M_a^-1
    const Tensor upper = cat({inv_a, zeros_like(inv_a)}, -1);                            // (..., pairs, s, 2s)
    const Tensor lower = cat({inv_lower_left, inv_d}, -1);
    inv = cat({upper, lower}, -2);  // (..., pairs, 2s, 2s)
  }
  return reshape(inv, shape_of({C, C}));
}

Tensor l2norm(const Tensor& z, double eps) { return z * rsqrt(sum(square(z), {-1}, true) + eps); }

}  // namespace

// ---- the chunked form ----------------------------------------------------------------------------
//
// forward was, token by token (rows of K, V, Q are the chunk's tokens; S is dv x dk):
//   S_t = S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T,   o_t = S_t q_t.
// Within a chunk, starting from the carried state S_0, every S_t has the WY form
//   S_t = S_0 (I - sum_{i<=t} w_i k_i^T) + sum_{i<=t} u_i k_i^T          (w_i in R^dk, u_i in R^dv)
// by induction: multiplying S_{t-1} of that form by (I - beta_t k_t k_t^T) and adding
// beta_t v_t k_t^T gives the same form with
//   w_t = beta_t (k_t - sum_{i<t} (k_t . k_i) w_i),    u_t = beta_t (v_t - sum_{i<t} (k_t . k_i) u_i).
// As rows: W = diag(beta) K - A W with A = tril(diag(beta) K K^T, -1), so
//   W = (I + A)^{-1} diag(beta) K,    U = (I + A)^{-1} diag(beta) V
// (the "T" of the UT transform is (I + A)^{-1} diag(beta)). Collecting the S_0 terms,
//   S_t = S_0 + sum_{i<=t} (u_i - S_0 w_i) k_i^T = S_0 + sum_{i<=t} u'_i k_i^T,   U' = U - W S_0^T,
// hence, for the whole chunk at once,
//   O     = Q S_0^T + tril(Q K^T) U'          (the diagonal included: o_t sees token t)
//   S_C   = S_0 + U'^T K.
// Only U' and S depend on the carried state, so W, U and tril(Q K^T) are computed for all chunks
// in one batch and the loop over the N chunks does two (C x d) matmuls each.
Tensor chunked_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta,
                          const Tensor& initial_state, Tensor* final_state, int64_t chunk_size) {
  check_inputs("chunked_delta_rule", 4, q, k, v, beta, initial_state);
  LINEA_CHECK(is_power_of_two(chunk_size), "chunked_delta_rule", "chunk_size must be a power of two, got ",
              chunk_size);
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), dk = q.size(3), dv = v.size(3);
  const TensorOptions like{q.dtype(), q.device()};
  Tensor state = initial_state.defined() ? initial_state : zeros({B, H, dv, dk}, like);
  if (T == 0) {
    if (final_state) *final_state = state;
    return zeros({B, H, 0, dv}, like);
  }
  // A chunk need not be longer than the sequence rounded up to a power of two.
  int64_t C = 1;
  while (C < std::min(chunk_size, T)) C *= 2;
  const int64_t N = (T + C - 1) / C;
  const Tensor qc = to_chunks(q, N, C), kc = to_chunks(k, N, C), vc = to_chunks(v, N, C);
  const Tensor bc = to_chunks(beta, N, C);  // (B, H, N, C, 1)

  const Tensor inv = inverse_unit_lower(kc, bc);  // (B, H, N, C, C)
  const Tensor w = matmul(inv, bc * kc);          // (B, H, N, C, dk)
  const Tensor u = matmul(inv, bc * vc);          // (B, H, N, C, dv)
  const Tensor scores = tril(matmul(qc, transpose(kc, -1, -2)));  // (B, H, N, C, C)

  // The only sequential part: S_0 of each chunk and its U'.
  const std::vector<Tensor> w_n = chunk_slices(w), u_n = chunk_slices(u), k_n = chunk_slices(kc);
  std::vector<Tensor> before, corrected;
  before.reserve(static_cast<size_t>(N));
  corrected.reserve(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    const size_t i = static_cast<size_t>(n);
    before.push_back(state);
    // From a zero state (the first chunk without an initial state) U' is U itself.
    const bool zero_state = n == 0 && !initial_state.defined();
    const Tensor u_prime = zero_state ? u_n[i] : u_n[i] - matmul(w_n[i], transpose(state, -1, -2));  // (B, H, C, dv)
    corrected.push_back(u_prime);
    const Tensor added = matmul(transpose(u_prime, -1, -2), k_n[i]);  // (B, H, dv, dk)
    state = zero_state ? added : state + added;
  }
  if (final_state) *final_state = state;

  const Tensor s_before = stack(before, 2);    // (B, H, N, dv, dk)
  const Tensor u_prime = stack(corrected, 2);  // (B, H, N, C, dv)
  const Tensor o = matmul(qc, transpose(s_before, -1, -2)) + matmul(scores, u_prime);  // (B, H, N, C, dv)
  const Tensor out = reshape(o, {B, H, N * C, dv});
  return N * C == T ? out : narrow(out, 2, 0, T);
}

// forward is S_t = S_{t-1} + beta (v - S_{t-1} k) k^T, o = S_t q.
Tensor delta_rule_step(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& beta, Tensor& state) {
  check_inputs("delta_rule_step", 3, q, k, v, beta, state);
  const Tensor s =
      state.defined() ? state : zeros({q.size(0), q.size(1), v.size(-1), q.size(-1)}, {q.dtype(), q.device()});
  const Tensor recalled = squeeze(matmul(s, unsqueeze(k, -1)), -1);  // S_{t-1} k, (B, H, dv)
  state = s + unsqueeze(beta * (v - recalled), -1) * unsqueeze(k, -2);
  return squeeze(matmul(state, unsqueeze(q, -1)), -1);
}

// ---- the layer -----------------------------------------------------------------------------------

namespace {
const names::Table<DeltaFeatureMap> kFeatureMapNames[] = {{DeltaFeatureMap::Silu, "silu"},
                                                          {DeltaFeatureMap::Identity, "identity"}};
}  // namespace

std::string delta_feature_map_name(DeltaFeatureMap map) { return names::name_in(kFeatureMapNames, map); }
DeltaFeatureMap parse_delta_feature_map(const std::string& name) {
  return names::parse_in(kFeatureMapNames, name, "DeltaNet", "feature map");
}

DeltaNet::DeltaNet(const DeltaNetConfig& config, Generator& gen) : config_(config) {
  DeltaNetConfig& c = config_;
  LINEA_CHECK(c.d_model > 0 && c.heads > 0, "DeltaNet", "needs d_model > 0 and heads > 0, got ", c.d_model, " and ",
              c.heads);
  c.head_dim = resolved_head_dim(c.head_dim, c.d_model, c.heads, "DeltaNet");
  LINEA_CHECK(c.head_dim > 0, "DeltaNet", "head_dim must be positive, got ", c.head_dim);
  LINEA_CHECK(is_power_of_two(c.chunk_size), "DeltaNet", "chunk_size must be a power of two, got ", c.chunk_size);
  LINEA_CHECK(c.l2_eps >= 0 && c.output_norm_eps >= 0, "DeltaNet", "eps values must be non-negative");
  const int64_t D = c.d_model, width = c.heads * c.head_dim;
  const LinearOptions proj{.bias = c.projection_bias, .init = LinearInit::XavierUniform};
  q_proj = register_module("q_proj", std::make_shared<Linear>(D, width, gen, proj));
  k_proj = register_module("k_proj", std::make_shared<Linear>(D, width, gen, proj));
  v_proj = register_module("v_proj", std::make_shared<Linear>(D, width, gen, proj));
  beta_proj = register_module("beta_proj", std::make_shared<Linear>(D, c.heads, gen));
  if (c.output_norm)
    norm = register_module("norm", std::make_shared<HeadNorm>(c.heads, c.head_dim,
                                                              HeadNormOptions{.eps = c.output_norm_eps}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(width, D, gen, proj));
}

DeltaNet::Projected DeltaNet::project(const Tensor& x) const {
  const int64_t B = x.size(0), T = x.size(1), H = config_.heads, dh = config_.head_dim;
  // (B, T, H w) -> (B, H, T, w)
  auto heads_first = [&](const Tensor& y, int64_t w) { return permute(reshape(y, {B, T, H, w}), {0, 2, 1, 3}); };
  auto feature = [&](const Linear& proj) {
    Tensor z = proj.forward(x);
    if (config_.feature_map == DeltaFeatureMap::Silu) z = silu(z);
    return heads_first(l2norm(reshape(z, {B, T, H, dh}), config_.l2_eps), dh);
  };
  return {.q = feature(*q_proj),
          .k = feature(*k_proj),
          .v = heads_first(v_proj->forward(x), dh),
          .beta = heads_first(sigmoid(beta_proj->forward(x)), 1)};
}

Tensor DeltaNet::finish(const Tensor& o_in) const {
  Tensor o = transpose(o_in, 1, 2);  // (B, T, H, dv)
  if (norm) o = norm->forward(o);
  return out_proj->forward(reshape(o, {o.size(0), o.size(1), config_.heads * config_.head_dim}));
}

Tensor DeltaNet::forward(const Tensor& x) {
  check_sequence_input(x, config_.d_model, "DeltaNet");
  const Projected p = project(x);
  return finish(chunked_delta_rule(p.q, p.k, p.v, p.beta, Tensor(), nullptr, config_.chunk_size));
}

std::unique_ptr<DecodeState> DeltaNet::init_state(int64_t batch) const {
  LINEA_CHECK(batch >= 0, "DeltaNet", "batch must be non-negative, got ", batch);
  auto s = std::make_unique<DeltaNetState>();
  const Tensor& w = q_proj->weight;
  s->state = zeros({batch, config_.heads, config_.head_dim, config_.head_dim}, {w.dtype(), w.device()});
  return s;
}

Tensor DeltaNet::step(const Tensor& x, DecodeState& state_in) {
  DeltaNetState* s = &step_state<DeltaNetState>(x, state_in, config_.d_model, "DeltaNet", &DeltaNetState::state);
  const Projected p = project(unsqueeze(x, 1));
  auto now = [](const Tensor& t) { return select(t, 2, 0); };  // (B, H, 1, .) -> (B, H, .)
  const Tensor o = delta_rule_step(now(p.q), now(p.k), now(p.v), now(p.beta), s->state);
  ++s->position;
  return select(finish(unsqueeze(o, 2)), 1, 0);
}

Tensor DeltaNet::prefill(const Tensor& x, DecodeState& state_in) {
  DeltaNetState* s = &prefill_state<DeltaNetState>(x, state_in, config_.d_model, "DeltaNet", &DeltaNetState::state);
  const Projected p = project(x);
  Tensor last_state;
  const Tensor o = chunked_delta_rule(p.q, p.k, p.v, p.beta, s->state, &last_state, config_.chunk_size);
  s->state = last_state;
  s->position += x.size(1);
  own_storage(*s);
  return finish(o);
}

}  // namespace linea::nn::linear
