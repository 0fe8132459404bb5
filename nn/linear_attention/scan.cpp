// The gated linear attention scan in its two forms (scan.h; the math is docs/math.md#numerics).
// Everything here is composite: gradients come from the ops' own backward.
//
// Shapes: B batch, H heads, T time, dk key dim, dv value dim; the chunked form cuts T into N
// chunks of C and each chunk into M sub-blocks of L = options.sub_block.
#include "nn/linear_attention/scan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "nn/names.h"

namespace linea::nn::linear {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// ---- checks ------------------------------------------------------------------------------------

// Checks ranks, sizes, dtypes and devices. The sequence forms pass (B, H, T, .) tensors
// (rank 4), scan_step (B, H, .) ones (rank 3); the state is (B, H, dv, dk) either way.
void check_inputs(const char* op, int64_t rank, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk,
                  const Tensor& gv, const Tensor& state) {
  LINEA_CHECK(q.defined() && k.defined() && v.defined(), op, "q, k and v must be defined");
  LINEA_CHECK(is_floating(q.dtype()), op, "expects float32 or float64 inputs, got q ", q.describe());
  LINEA_CHECK(q.dim() == rank, op, "q must have ", rank, " dims (", rank == 4 ? "B, H, T, dk" : "B, H, dk",
              "), got ", q.describe());
  const Shape lead(q.shape().begin(), q.shape().end() - 1);
  const int64_t dk = q.size(-1);
  // k and v have q's dtype; the decays and the state too, except in a bfloat16 scan (float32).
  const DType state_dtype = q.dtype() == kBFloat16 ? kFloat32 : q.dtype();
  // q's device, the dtype `expected`, leading dims `lead`, and a last dim of one of the allowed sizes.
  auto check = [&](const char* name, const Tensor& x, DType expected, const Shape& expected_lead, int64_t last,
                   bool scalar_ok) {
    LINEA_CHECK(x.dtype() == expected && x.device() == q.device(), op, name, " ", x.describe(),
                " differs in dtype or device from q ", q.describe(),
                q.dtype() == kBFloat16 ? " (a bfloat16 scan has float32 decays and states)" : "");
    const bool lead_ok = x.dim() == static_cast<int64_t>(expected_lead.size()) + 1 &&
                         Shape(x.shape().begin(), x.shape().end() - 1) == expected_lead;
    LINEA_CHECK(lead_ok && (x.size(-1) == last || (scalar_ok && x.size(-1) == 1)), op, name, " ", x.describe(),
                " does not fit q ", q.describe(), ": expected last dim ", last, scalar_ok ? " (or 1)" : "",
                " after ", shape_str(expected_lead));
  };
  check("k", k, q.dtype(), lead, dk, false);
  LINEA_CHECK(v.dim() == rank, op, "v must have ", rank, " dims, got ", v.describe());
  const int64_t dv = v.size(-1);
  check("v", v, q.dtype(), lead, dv, false);
  if (gk.defined()) check("gk", gk, state_dtype, lead, dk, true);
  if (gv.defined()) check("gv", gv, state_dtype, lead, dv, true);
  if (state.defined()) check("state", state, state_dtype, {q.size(0), q.size(1), dv}, dk, false);
}

// ---- small helpers -------------------------------------------------------------------------------

// x * exp(log_scale), or x itself when there is no scale (undefined: no decay on that side).
Tensor decayed(const Tensor& x, const Tensor& log_scale) { return log_scale.defined() ? x * exp(log_scale) : x; }

// A (rows, cols) constant of `like`'s dtype and device: if_true where pred(i, j), else if_false.
template <class Pred>
Tensor pattern(int64_t rows, int64_t cols, Pred pred, double if_true, double if_false, const Tensor& like) {
  std::vector<double> m(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[static_cast<size_t>(i * cols + j)] = pred(i, j) ? if_true : if_false;
  return to(to(from_vector(m, {rows, cols}), like.device()), like.dtype());
}

// x (B, H, T, d) padded with zeros to (B, H, N * C, d) and seen as (B, H, N, C, d). Zero keys and
// values add nothing to the state and a zero log decay keeps it, so the state after the padding
// is exactly S_T; the padded outputs are dropped.
Tensor to_chunks(const Tensor& x, int64_t n_chunks, int64_t chunk) {
  if (!x.defined()) return x;
  const int64_t pad = n_chunks * chunk - x.size(2);
  const Tensor padded =
      pad == 0 ? x : cat({x, zeros({x.size(0), x.size(1), pad, x.size(3)}, {x.dtype(), x.device()})}, 2);
  return reshape(padded, {x.size(0), x.size(1), n_chunks, chunk, x.size(3)});
}

// (B, H, N, C, d) seen as (B, H, N, M, L, d): M sub-blocks of L positions. A view (C = M L).
Tensor to_sub_blocks(const Tensor& x, int64_t sub) {
  if (!x.defined()) return x;
  return reshape(x, {x.size(0), x.size(1), x.size(2), x.size(3) / sub, sub, x.size(4)});
}

// The inputs cut into chunks, (B, H, N, C, .): the per-step log decays gk (B, H, N, C, dk|1) and
// gv (B, H, N, C, dv|1) may be undefined (no decay on that side).
struct Chunks {
  Tensor q, k, v, gk, gv;
};

// ---- log decays summed over segments -----------------------------------------------------------
//
// The decay from step s to step t > s is exp of the sum of g over (s, t]. Every such sum below
// is computed from exactly the steps it spans, as a (masked) cumulative sum of g, and never as the
// difference G_t - G_s of two prefix sums G: in float32 that difference carries the rounding of
// |G|, about |G| * 6e-8, and after a run of closed gates (g at the floor of -20, so |G| reaches
// ~1000 in a chunk) that is ~1e-4 of error in an exponent whose true value may be near 0. The
// sums are <= 0 (g <= 0), so no exp overflows; where s > t the exponent is set to -inf BEFORE the
// exp (added, as add's backward is the gradient itself), so exp gives exactly 0 and its backward
// (gy * 0) sends exactly 0 back. cumsum accumulates in double.

// Sum of g over (s, t] for every pair of steps of a block: g (..., len, c) -> (..., len, len, c)
// with t along dim -3 and s along dim -2; 0 on the diagonal, -inf where s > t.
Tensor pair_log_decay(const Tensor& g) {
  const int64_t len = g.size(-2);
  const Tensor after_s = unsqueeze(pattern(len, len, [](int64_t t, int64_t s) { return t > s; }, 1.0, 0.0, g), -1);
  const Tensor future = unsqueeze(pattern(len, len, [](int64_t t, int64_t s) { return s > t; }, kNegInf, 0.0, g), -1);
  // X[t, s] = g_t where t > s: its cumulative sum over t is the sum over (s, t].
  return cumsum(unsqueeze(g, -2) * after_s, -3) + future;
}

// Sum of g over (s, C) for every step s of each chunk: g (B, H, N, C, c) -> (B, H, N, C, c).
Tensor log_decay_to_chunk_end(const Tensor& g) {
  Shape one = g.shape();
  one[3] = 1;
  // next[s] = g_{s+1}, 0 past the end; its reverse cumulative sum from s is the sum over (s, C).
  const Tensor next = cat({narrow(g, 3, 1, g.size(3) - 1), zeros(one, {g.dtype(), g.device()})}, 3);
  return cumsum(next, 3, /*reverse=*/true);
}

// ---- within a chunk ------------------------------------------------------------------------------

// The intra-chunk output when the decay is at most one scalar per step, g (B, H, N, C, 1) or
// undefined: it scales whole entries of the C x C score matrix,
//   o_t = sum_{s<=t} (q_t . k_s) exp(sum of g over (s, t]) v_s.
Tensor intra_scalar(const Chunks& c, const Tensor& g) {
  Tensor scores = matmul(c.q, transpose(c.k, -1, -2));  // (B, H, N, C, C)
  scores = g.defined() ? scores * exp(squeeze(pair_log_decay(g), -1)) : tril(scores);
  return matmul(scores, c.v);  // (B, H, N, C, dv)
}

// The intra-chunk output with per-channel decays (gk over dk and/or gv over dv; at least one),
//   o_tj = sum_{s<=t} [sum_i q_ti k_si exp(Gk_ti - Gk_si)] exp(Gv_tj - Gv_sj) v_sj,
// with G_t - G_s standing for the sum of g over (s, t], by secondary chunking, so that every
// exponent is <= 0 (docs/math.md#sub-blocks-and-reference-points):
//   * Diagonal sub-blocks (s, t in one sub-block of L): elementwise, with the (L, L, d) exponents
//     of pair_log_decay, -inf where s > t.
//   * Earlier sub-blocks (t in sub-block i, s before its start r = i L): through the reference
//     point r, exp(G_t - G_s) = exp(G_t - G_r) exp(G_r - G_s), both factors <= 0:
//     q~_t = q_t exp(Gk_t - Gk_r), k~_s = k_s exp(Gk_r - Gk_s), and the scores q~ k~^T are one
//     matmul per sub-block; on the value side o_t = exp(Gv_t - Gv_r) [scores (v_s exp(Gv_r - Gv_s))].
//     Sub-block 0 has no earlier keys, and no query sees keys of the last sub-block as earlier
//     ones, so the queries of sub-blocks 1..M-1 meet the keys 0..C-L-1, with keys s >= r masked.
Tensor intra_per_channel(const Chunks& c, int64_t sub) {
  const int64_t B = c.q.size(0), H = c.q.size(1), N = c.q.size(2), C = c.q.size(3), dv = c.v.size(-1);
  const int64_t M = C / sub;
  const Tensor qs = to_sub_blocks(c.q, sub), ks = to_sub_blocks(c.k, sub), vs = to_sub_blocks(c.v, sub);
  const Tensor gks = to_sub_blocks(c.gk, sub), gvs = to_sub_blocks(c.gv, sub);  // (B, H, N, M, L, .)

  // Diagonal sub-blocks; (t, s) pairs: t indexes dim -3 (unsqueeze(-2)), s dim -2 (unsqueeze(-3)).
  Tensor scores;  // (B, H, N, M, L, L)
  if (gks.defined()) scores = sum(unsqueeze(qs, -2) * unsqueeze(ks, -3) * exp(pair_log_decay(gks)), {-1});
  else scores = tril(matmul(qs, transpose(ks, -1, -2)));
  Tensor out;  // (B, H, N, M, L, dv)
  if (gvs.defined()) out = sum(unsqueeze(scores, -1) * exp(pair_log_decay(gvs)) * unsqueeze(vs, -3), {-2});
  else out = matmul(scores, vs);
  if (M == 1) return reshape(out, {B, H, N, C, dv});

  // Earlier sub-blocks: queries of sub-blocks 1..M-1 against keys 0..C-L-1; the i-th of these
  // query blocks (i from 0) has its reference point at r_i = (i + 1) L.
  const int64_t late = M - 1, early = C - sub;
  // (B, H, N, M, L, .) at the late queries -> (B, H, N, M-1, L, .).
  auto at_queries = [&](const Tensor& xs) { return narrow(xs, 3, 1, late); };
  // (B, H, N, C, .) at the early keys s -> (B, H, N, 1, C-L, .); with shift 1, at s + 1.
  auto at_keys = [&](const Tensor& x, int64_t shift = 0) { return unsqueeze(narrow(x, 3, shift, early), 3); };
  // Sum of g over (r, t] for each late query t: a cumsum within the sub-block that skips r itself.
  const Tensor skip_first = pattern(sub, 1, [](int64_t t, int64_t) { return t > 0; }, 1.0, 0.0, c.q);  // (L, 1)
  auto from_ref = [&](const Tensor& gs) { return cumsum(at_queries(gs) * skip_first, -2); };
  // Sum of g over (s, r_i] for each early key s < r_i, -inf for s >= r_i: (B, H, N, M-1, C-L, .).
  // Z[i, s] = g_{s+1} where s < r_i; its reverse cumulative sum from s is the sum over (s, r_i].
  auto is_before_ref = [sub](int64_t i, int64_t s) { return s < (i + 1) * sub; };
  const Tensor before_ref = unsqueeze(pattern(late, early, is_before_ref, 1.0, 0.0, c.q), -1);
  const Tensor after_ref = unsqueeze(pattern(late, early, is_before_ref, 0.0, kNegInf, c.q), -1);
  auto to_ref = [&](const Tensor& g) { return cumsum(at_keys(g, 1) * before_ref, -2, /*reverse=*/true) + after_ref; };

  Tensor q_late = at_queries(qs), k_early = at_keys(c.k);
  if (gks.defined()) {
    q_late = q_late * exp(from_ref(gks));
    k_early = k_early * exp(to_ref(c.gk));
  }
  // Without a key decay these scores are not masked; the masked values below zero them.
  const Tensor cross = matmul(q_late, transpose(k_early, -1, -2));  // (B, H, N, M-1, L, C-L)
  Tensor out_late;                                                  // (B, H, N, M-1, L, dv)
  if (gvs.defined()) out_late = matmul(cross, at_keys(c.v) * exp(to_ref(c.gv))) * exp(from_ref(gvs));
  else out_late = matmul(cross, at_keys(c.v));
  out = out + cat({zeros({B, H, N, 1, sub, dv}, {out.dtype(), out.device()}), out_late}, 3);
  return reshape(out, {B, H, N, C, dv});
}

// ---- between chunks ------------------------------------------------------------------------------

// The states before each chunk, (B, H, N, dv, dk), from each chunk's own contribution `local`
// (B, H, N, dv, dk) and its decays on the value side (B, H, N, dv|1, 1) and the key side
// (B, H, N, 1, dk|1), each undefined when there is none:
//   S_before[0] = S_0,  S_before[n+1] = value_decay_n * S_before[n] * key_decay_n + local_n.
// Sets *final_state = S_before[N]. The only sequential loop of the chunked form: N steps.
Tensor states_before_chunks(const Tensor& local, const Tensor& value_decay, const Tensor& key_decay,
                            const Tensor& initial, Tensor* final_state) {
  const int64_t N = local.size(2);
  if (!value_decay.defined() && !key_decay.defined()) {
    // Nothing decays, so the recurrence is a cumulative sum over chunks: no loop.
    const Tensor through = cumsum(local, 2);  // S after chunk n, less S_0
    Shape one_chunk = local.shape();
    one_chunk[2] = 1;
    Tensor before = cat({zeros(one_chunk, {local.dtype(), local.device()}), narrow(through, 2, 0, N - 1)}, 2);
    Tensor last = select(through, 2, N - 1);
    if (initial.defined()) {
      before = before + unsqueeze(initial, 2);
      last = last + initial;
    }
    if (final_state) *final_state = last;
    return before;
  }
  // Each slice of a tensor gets, in backward, a gradient of the whole tensor's size (zeros but
  // for its part), so cutting N chunks straight out of `local` would cost O(N^2 dv dk) there.
  // Cutting groups of about sqrt(N) chunks first, then the chunks of each group, costs
  // O(N^1.5 dv dk).
  const auto group = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(N))));
  std::vector<Tensor> before;
  before.reserve(static_cast<size_t>(N));
  const Shape state_shape{local.size(0), local.size(1), local.size(3), local.size(4)};
  Tensor state = initial.defined() ? initial : zeros(state_shape, {local.dtype(), local.device()});
  for (int64_t first = 0; first < N; first += group) {
    const int64_t size = std::min(group, N - first);
    auto of_group = [&](const Tensor& x) { return x.defined() ? narrow(x, 2, first, size) : x; };
    const Tensor local_g = of_group(local), value_decay_g = of_group(value_decay), key_decay_g = of_group(key_decay);
    for (int64_t i = 0; i < size; ++i) {
      before.push_back(state);
      if (first + i == 0 && !initial.defined()) {
        state = select(local_g, 2, 0);  // from a zero state, the chunk's own contribution alone
        continue;
      }
      Tensor decay = value_decay_g.defined() ? select(value_decay_g, 2, i) : Tensor();
      if (key_decay_g.defined()) {
        const Tensor key = select(key_decay_g, 2, i);
        decay = decay.defined() ? decay * key : key;
      }
      state = state * decay + select(local_g, 2, i);
    }
  }
  if (final_state) *final_state = state;
  return stack(before, 2);
}

}  // namespace

// forward is, per chunk with state S_prev carried in, G_t the log decay summed from the chunk's
// start through step t and G_t - G_s the one summed over (s, t] (each computed as such, see "log
// decays summed over segments" above):
//   o_t    = [intra-chunk part]  +  exp(Gv_t) * (S_prev (q_t exp(Gk_t)))
//   S_next = diag(exp(Gv_last)) S_prev diag(exp(Gk_last))
//            + sum_s (v_s exp(Gv_last - Gv_s)) (k_s exp(Gk_last - Gk_s))^T
// computed for all chunks at once except the recurrence S_prev -> S_next itself. Memory per
// (batch, head): the inputs and log decay sums, O(T (dk + dv)); the C x C scores per chunk,
// O(T C); the diagonal sub-blocks' (L, L, d) exponents, O(T L d); the earlier-sub-block k~ and
// v~, O(T (C / L) d); the chunk states, O((T / C) dv dk). Never T x T, never T x C x d.
Tensor chunked_scan(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& gk_in,
                    const Tensor& gv_in, const Tensor& initial_state, Tensor* final_state, const ScanOptions& options) {
  check_inputs("chunked_scan", 4, q_in, k_in, v_in, gk_in, gv_in, initial_state);
  LINEA_CHECK(q_in.dtype() != kBFloat16, "chunked_scan",
              "the composite scan runs in float32 or float64; a bfloat16 scan runs on the fused kernels "
              "(ScanKernel::Chunked or Sequential), got q ", q_in.describe());
  const int64_t sub = options.sub_block;
  LINEA_CHECK(sub > 0 && options.chunk_size > 0 && options.chunk_size % sub == 0, "chunked_scan",
              "chunk_size ", options.chunk_size, " must be a positive multiple of sub_block ", sub);
  const int64_t B = q_in.size(0), H = q_in.size(1), T = q_in.size(2), dk = q_in.size(3), dv = v_in.size(3);
  if (T == 0) {
    if (final_state)
      *final_state = initial_state.defined() ? initial_state : zeros({B, H, dv, dk}, {q_in.dtype(), q_in.device()});
    return zeros({B, H, 0, dv}, {q_in.dtype(), q_in.device()});
  }

  // A scalar decay commutes with everything: diag(e^a) S e^b = diag(e^(a+b)) S. Folding it into
  // the other side's decay leaves at most one decay per side, and a scalar one only where there is
  // no per-channel one.
  Tensor gk = gk_in, gv = gv_in;
  if (gk.defined() && gk.size(-1) == 1 && gv.defined()) {
    gv = gv + gk;
    gk = Tensor();
  } else if (gv.defined() && gv.size(-1) == 1 && gk.defined()) {
    gk = gk + gv;
    gv = Tensor();
  }
  // A gate that is exactly closed has log decay -inf, which the 0/1 masks of the segment sums
  // would turn into NaN (-inf * 0). Any decay through a step below -1e4 is exactly 0 in float32
  // and float64 alike, and so is its gradient, so flooring there changes nothing else.
  constexpr double kLogDecayFloor = -1e4;
  if (gk.defined()) gk = clamp(gk, kLogDecayFloor, std::nullopt);
  if (gv.defined()) gv = clamp(gv, kLogDecayFloor, std::nullopt);

  // A chunk need not be longer than the sequence rounded up to whole sub-blocks.
  const int64_t C = std::min(options.chunk_size, (T + sub - 1) / sub * sub);
  const int64_t N = (T + C - 1) / C;
  const Chunks c{to_chunks(q_in, N, C), to_chunks(k_in, N, C), to_chunks(v_in, N, C), to_chunks(gk, N, C),
                 to_chunks(gv, N, C)};
  const bool per_channel = (c.gk.defined() && c.gk.size(-1) > 1) || (c.gv.defined() && c.gv.size(-1) > 1);
  const Tensor intra = per_channel ? intra_per_channel(c, sub) : intra_scalar(c, c.gk.defined() ? c.gk : c.gv);

  // Each chunk's contribution to the state: its keys and values decayed to the chunk's end.
  auto to_end = [](const Tensor& g) { return g.defined() ? log_decay_to_chunk_end(g) : g; };
  const Tensor local =
      matmul(transpose(decayed(c.v, to_end(c.gv)), -1, -2), decayed(c.k, to_end(c.gk)));  // (B, H, N, dv, dk)
  // Log decay from each chunk's start through step t (inclusive), (B, H, N, C, .), and its value
  // at the chunk's last step: the chunk's total, (B, H, N, dv|1, 1) / (B, H, N, 1, dk|1).
  auto from_start = [](const Tensor& g) { return g.defined() ? cumsum(g, 3) : g; };
  const Tensor gk_in_chunk = from_start(c.gk), gv_in_chunk = from_start(c.gv);
  const Tensor key_decay = gk_in_chunk.defined() ? exp(narrow(gk_in_chunk, 3, C - 1, 1)) : Tensor();
  const Tensor value_decay =
      gv_in_chunk.defined() ? exp(transpose(narrow(gv_in_chunk, 3, C - 1, 1), -1, -2)) : Tensor();

  const Tensor before = states_before_chunks(local, value_decay, key_decay, initial_state, final_state);
  // The carried state read by every query of the chunk: exp(Gv_t) * (S_prev (q_t exp(Gk_t))).
  const Tensor inter = decayed(matmul(decayed(c.q, gk_in_chunk), transpose(before, -1, -2)), gv_in_chunk);

  const Tensor out = reshape(intra + inter, {B, H, N * C, dv});
  return N * C == T ? out : narrow(out, 2, 0, T);
}

Tensor scan(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
            const Tensor& initial_state, Tensor* final_state, const ScanOptions& options) {
  if (options.kernel == ScanKernel::Composite)
    return chunked_scan(q, k, v, gk, gv, initial_state, final_state, options);
  check_inputs("scan", 4, q, k, v, gk, gv, initial_state);
  const ScanAlgorithm algorithm =
      options.kernel == ScanKernel::Chunked ? ScanAlgorithm::Chunked : ScanAlgorithm::Sequential;
  if (final_state == nullptr) return gated_linear_scan(q, k, v, gk, gv, initial_state, algorithm);
  ScanResult result = gated_linear_scan_with_state(q, k, v, gk, gv, initial_state, algorithm);
  *final_state = result.final_state;
  return result.out;
}

// forward is S_t = diag(exp(gv)) S_{t-1} diag(exp(gk)) + v k^T, o = S_t q.
Tensor scan_step(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv, Tensor& state) {
  check_inputs("scan_step", 3, q, k, v, gk, gv, state);
  LINEA_CHECK(q.dtype() != kBFloat16, "scan_step",
              "the recurrent form runs in float32 or float64 (decoding keeps float32 activations), got q ",
              q.describe());
  Tensor s = state.defined() ? state : zeros({q.size(0), q.size(1), v.size(-1), q.size(-1)}, {q.dtype(), q.device()});
  if (gv.defined()) s = s * exp(unsqueeze(gv, -1));  // rows: the value dim
  if (gk.defined()) s = s * exp(unsqueeze(gk, -2));  // columns: the key dim
  s = s + unsqueeze(v, -1) * unsqueeze(k, -2);
  state = s;
  return squeeze(matmul(s, unsqueeze(q, -1)), -1);
}

Tensor recurrent_scan(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
                      const Tensor& initial_state, Tensor* final_state) {
  check_inputs("recurrent_scan", 4, q, k, v, gk, gv, initial_state);
  const int64_t T = q.size(2);
  auto at = [](const Tensor& x, int64_t t) { return x.defined() ? select(x, 2, t) : x; };
  Tensor state = initial_state.defined()
                     ? initial_state
                     : zeros({q.size(0), q.size(1), v.size(3), q.size(3)}, {q.dtype(), q.device()});
  std::vector<Tensor> outputs;
  outputs.reserve(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t)
    outputs.push_back(scan_step(at(q, t), at(k, t), at(v, t), at(gk, t), at(gv, t), state));
  if (final_state) *final_state = state;
  return T == 0 ? zeros({q.size(0), q.size(1), 0, v.size(3)}, {q.dtype(), q.device()}) : stack(outputs, 2);
}

namespace {
const names::Table<ScanKernel> kKernelNames[] = {
    {ScanKernel::Chunked, "chunked"}, {ScanKernel::Sequential, "sequential"}, {ScanKernel::Composite, "composite"}};
}  // namespace

std::string scan_kernel_name(ScanKernel kernel) { return names::name_in(kKernelNames, kernel); }
ScanKernel parse_scan_kernel(const std::string& name) { return names::parse_in(kKernelNames, name, "scan", "scan kernel"); }

}  // namespace linea::nn::linear
