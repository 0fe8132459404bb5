// The gated linear attention recurrence (tensor/backend.h: gated_scan), the plain CPU kernel and
// the oracle of the CUDA one. The composite chunked scan (nn/linear_attention/scan.cpp) spends most of its
// time in dozens of small elementwise ops and their copies; this kernel walks time once per
// (batch, head), which is O(T dk dv) work with nothing but the state in memory.
//
// One task per (batch, head), in parallel. Within a task time runs sequentially with the dv x dk
// state in a buffer of the task (a few KB, so it stays in L1 cache). Each row of the state is
// updated by one loop over the contiguous key dim that does all of a step's work on that row
// (row_forward, row_backward), written so that the compiler vectorizes it.
// Arithmetic is in the element type: a float32 state accumulates over T in float32, as every GPU
// kernel of this recurrence does (and as the composite scan does in float32); float64 exists for
// gradient checks.
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_backend.h"
#include "tensor/contiguous_outputs.h"
#include "tensor/widen.h"
#include "cpu/parallel.h"

namespace linea::cpu {

namespace {

// The backward pass reruns the forward keeping S before every kChunk-th step (checkpoints), then
// goes through the chunks in reverse, recomputing each chunk's kChunk states from its checkpoint.
// Memory per task O((T / kChunk + kChunk) dv dk) instead of the O(T dv dk) of saving every state.
constexpr int64_t kChunk = 64;

// Row loops run in blocks of kLanes independent lanes: a sum over the row (a dot product) kept in
// kLanes partial sums is kLanes independent chains the compiler may vectorize, where one running
// sum is a single chain it may not reorder (that would change the rounding). The loop bodies
// read and write each element directly (staging a block through local arrays made GCC emit
// scalar code), so the lanes become vector operations.
constexpr int kLanes = 8;

template <class T>
T sum_lanes(const T (&part)[kLanes]) {
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

// One step on one row i of S, in place:  S[i, :] = a (S[i, :] * ek) + b k  (a = exp(gv_t[i]),
// b = v_t[i]; without decays a = ek = 1, skipped). Returns S_t[i, :] . q with kOutput, else 0.
template <class T, bool kDecays, bool kOutput>
T row_forward(T* s, const T* ek, const T* k, const T* q, T a, T b, int64_t n) {
  T part[kLanes] = {}, tail = 0;
  auto update = [&](int64_t j) {
    const T x = kDecays ? s[j] * (a * ek[j]) + b * k[j] : s[j] + b * k[j];
    s[j] = x;
    return kOutput ? x * q[j] : T(0);
  };
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) part[l] += update(j + l);
  for (; j < n; ++j) tail += update(j);
  return sum_lanes(part) + tail;
}

// What one row i of the backward step sums over the key dim.
template <class T>
struct RowSums {
  T dv;  // G_t[i, :] . k_t
  T gp;  // sum_j G_t[i, j] P_t[i, j]
};

// One step of the backward on one row i (gated_scan_backward in tensor/backend.h), in one pass
// over the key dim. g holds G_{t+1} decayed to step t; on return it holds Dv_t G_t Dk_t, what
// reaches S_{t-1}. s is S_t[i, :], p = S_{t-1}[i, :]; do_i = dout_t[i], v_i = v_t[i], a =
// exp(gv_t[i]). Adds row i's terms to dq (S_t^T do_t), dk (G_t^T v_t) and, with decays, to dgk
// the column sums of G_t * P_t, P_t = Dv_t S_{t-1} Dk_t, that is of (Dv_t G_t Dk_t) * S_{t-1}.
template <class T, bool kDecays>
RowSums<T> row_backward(T* g, const T* s, const T* p, const T* q, const T* k, const T* ek, T do_i, T v_i, T a,
                        T* dq, T* dk, T* dgk, int64_t n) {
  T dv_part[kLanes] = {}, gp_part[kLanes] = {}, dv_tail = 0, gp_tail = 0;
  auto update = [&](int64_t j, T& dv_sum, T& gp_sum) {
    T gj = g[j] + do_i * q[j];  // G_t
    dq[j] += s[j] * do_i;
    dk[j] += gj * v_i;
    dv_sum += gj * k[j];
    if (kDecays) {
      gj *= a * ek[j];
      const T gp = gj * p[j];
      gp_sum += gp;
      dgk[j] += gp;
    }
    g[j] = gj;
  };
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) update(j + l, dv_part[l], gp_part[l]);
  for (; j < n; ++j) update(j, dv_tail, gp_tail);
  return {sum_lanes(dv_part) + dv_tail, sum_lanes(gp_part) + gp_tail};
}

// The inputs of one task (one batch element and head), all contiguous; gk, gv and s0 are null
// where undefined.
template <class T>
struct Task {
  const T *q, *k, *v, *gk, *gv, *s0;
  int64_t steps, dk, dv, gk_width, gv_width;

  bool decays() const { return gk != nullptr || gv != nullptr; }

  // exp of step t's log decays, widened to full rows: ek (dk), ev (dv); 1 where there is no decay.
  // Each exp is taken once per channel per step (once per step for a scalar decay).
  void decay_factors(int64_t t, T* ek, T* ev) const {
    widen(gk, gk_width, dk, t, ek);
    widen(gv, gv_width, dv, t, ev);
  }

  // S = Dv_t S Dk_t + v_t k_t^T in place, with step t's decay factors; with kOutput also
  // o_t = S_t q_t into o.
  template <bool kDecays, bool kOutput>
  void step(int64_t t, T* S, const T* ek, const T* ev, T* o) const {
    const T *kt = k + t * dk, *vt = v + t * dv, *qt = q + t * dk;
    for (int64_t i = 0; i < dv; ++i) {
      const T out = row_forward<T, kDecays, kOutput>(S + i * dk, ek, kt, qt, kDecays ? ev[i] : T(1), vt[i], dk);
      if (kOutput) o[i] = out;
    }
  }

  // The state before step 0: the initial state, or zeros.
  void initial(T* s) const {
    if (s0 != nullptr) std::copy(s0, s0 + dv * dk, s);
    else std::fill(s, s + dv * dk, T(0));
  }

 private:
  static void widen(const T* g, int64_t width, int64_t n, int64_t t, T* out) {
    if (g == nullptr) std::fill(out, out + n, T(1));
    else if (width == 1) std::fill(out, out + n, std::exp(g[t]));
    else
      for (int64_t j = 0; j < n; ++j) out[j] = std::exp(g[t * n + j]);
  }
};

// Contiguous copies of the inputs, and the task view over them.
struct Inputs {
  Tensor q, k, v, gk, gv, s0;
  int64_t tasks, steps, dk, dv;

  Inputs(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& gk_, const Tensor& gv_,
         const Tensor& s0_)
      : q(contiguous_copy(q_)),
        k(contiguous_copy(k_)),
        v(contiguous_copy(v_)),
        gk(gk_.defined() ? contiguous_copy(gk_) : gk_),
        gv(gv_.defined() ? contiguous_copy(gv_) : gv_),
        s0(s0_.defined() ? contiguous_copy(s0_) : s0_),
        tasks(q_.size(0) * q_.size(1)),
        steps(q_.size(2)),
        dk(q_.size(3)),
        dv(v_.size(3)) {}

  template <class E>
  Task<E> task(int64_t b) const {
    const int64_t gkw = gk.defined() ? gk.size(3) : 0, gvw = gv.defined() ? gv.size(3) : 0;
    return {q.data<E>() + b * steps * dk,
            k.data<E>() + b * steps * dk,
            v.data<E>() + b * steps * dv,
            gk.defined() ? gk.data<E>() + b * steps * gkw : nullptr,
            gv.defined() ? gv.data<E>() + b * steps * gvw : nullptr,
            s0.defined() ? s0.data<E>() + b * dv * dk : nullptr,
            steps,
            dk,
            dv,
            gkw,
            gvw};
  }
};

// This task's part of an output of `per_task` elements per task, or null where undefined.
template <class T>
T* out_of(const Tensor& x, int64_t task, int64_t per_task) {
  return x.defined() ? x.data<T>() + task * per_task : nullptr;
}

template <class T, bool kDecays>
void forward_task(const Task<T>& task, T* o, T* final_state, T* state, T* ek, T* ev) {
  task.initial(state);
  for (int64_t t = 0; t < task.steps; ++t) {
    if (kDecays) task.decay_factors(t, ek, ev);
    task.template step<kDecays, true>(t, state, ek, ev, o + t * task.dv);
  }
  if (final_state) std::copy(state, state + task.dv * task.dk, final_state);
}

// Per-thread buffers of the backward.
template <class T>
struct BackwardScratch {
  std::vector<T> checkpoints;  // (n_chunks, dv, dk): S before each chunk
  std::vector<T> states;       // (kChunk, dv, dk): S_t for the steps of one chunk
  std::vector<T> eks, evs;     // (T, dk), (T, dv): every step's decay factors, exp taken once
  std::vector<T> grad;         // (dv, dk): G
  std::vector<T> row_sums;     // (dv): sum_j G_t P_t of each row
  std::vector<T> dq, dk, dgk;  // (dk): one step's sums over rows, before they go to the outputs

  BackwardScratch(int64_t steps, int64_t dk_, int64_t dv) {
    const int64_t n_chunks = (steps + kChunk - 1) / kChunk, size = dv * dk_;
    auto sized = [](std::vector<T>& x, int64_t n) { x.assign(static_cast<size_t>(n), T(0)); };
    sized(checkpoints, n_chunks * size);
    sized(states, std::min(kChunk, steps) * size);
    sized(eks, steps * dk_);
    sized(evs, steps * dv);
    sized(grad, size);
    sized(row_sums, dv);
    sized(dq, dk_);
    sized(dk, dk_);
    sized(dgk, dk_);
  }
};

// The gradients' destinations for one task; null where not wanted.
template <class T>
struct TaskGrads {
  const T *dout, *dfinal;
  T *dq, *dk, *dv, *dgk, *dgv, *ds0;
};

template <class T, bool kDecays>
void backward_task(const Task<T>& task, const TaskGrads<T>& out, BackwardScratch<T>& w) {
  const int64_t dk = task.dk, dv = task.dv, steps = task.steps, size = dv * dk;
  const int64_t n_chunks = (steps + kChunk - 1) / kChunk;
  if (kDecays)
    for (int64_t t = 0; t < steps; ++t) task.decay_factors(t, w.eks.data() + t * dk, w.evs.data() + t * dv);
  auto ek_at = [&](int64_t t) { return w.eks.data() + t * dk; };
  auto ev_at = [&](int64_t t) { return w.evs.data() + t * dv; };

  // The forward again, keeping the state before each chunk.
  task.initial(w.checkpoints.data());
  for (int64_t n = 0; n + 1 < n_chunks; ++n) {
    T* next = w.checkpoints.data() + (n + 1) * size;
    std::copy(w.checkpoints.data() + n * size, next, next);
    for (int64_t t = n * kChunk; t < (n + 1) * kChunk; ++t)
      task.template step<kDecays, false>(t, next, ek_at(t), ev_at(t), nullptr);
  }

  // G_T = dfinal (do_T q_T^T is added at step T, as at every step).
  if (out.dfinal) std::copy(out.dfinal, out.dfinal + size, w.grad.begin());
  else std::fill(w.grad.begin(), w.grad.end(), T(0));
  for (int64_t n = n_chunks - 1; n >= 0; --n) {
    const int64_t t0 = n * kChunk, len = std::min(kChunk, steps - t0);
    const T* checkpoint = w.checkpoints.data() + n * size;
    for (int64_t s = 0; s < len; ++s) {
      T* S = w.states.data() + s * size;
      std::copy(s == 0 ? checkpoint : S - size, s == 0 ? checkpoint + size : S, S);
      task.template step<kDecays, false>(t0 + s, S, ek_at(t0 + s), ev_at(t0 + s), nullptr);
    }
    for (int64_t s = len - 1; s >= 0; --s) {
      const int64_t t = t0 + s;
      const T *S = w.states.data() + s * size, *S_prev = s == 0 ? checkpoint : S - size;
      const T *ek = ek_at(t), *ev = ev_at(t);
      const T *qt = task.q + t * dk, *kt = task.k + t * dk, *vt = task.v + t * dv, *do_t = out.dout + t * dv;
      std::fill(w.dq.begin(), w.dq.end(), T(0));
      std::fill(w.dk.begin(), w.dk.end(), T(0));
      if (kDecays) std::fill(w.dgk.begin(), w.dgk.end(), T(0));
      T total = 0;  // sum_ij G_t P_t: a scalar decay's gradient
      for (int64_t i = 0; i < dv; ++i) {
        const RowSums<T> r =
            row_backward<T, kDecays>(w.grad.data() + i * dk, S + i * dk, S_prev + i * dk, qt, kt, ek, do_t[i], vt[i],
                                     kDecays ? ev[i] : T(1), w.dq.data(), w.dk.data(), w.dgk.data(), dk);
        if (out.dv) out.dv[t * dv + i] = r.dv;
        w.row_sums[i] = r.gp;
        total += r.gp;
      }
      if (out.dq) std::copy(w.dq.begin(), w.dq.end(), out.dq + t * dk);
      if (out.dk) std::copy(w.dk.begin(), w.dk.end(), out.dk + t * dk);
      if (!kDecays) continue;
      if (out.dgv) {
        if (task.gv_width == 1) out.dgv[t] = total;
        else std::copy(w.row_sums.begin(), w.row_sums.end(), out.dgv + t * dv);
      }
      if (out.dgk) {
        if (task.gk_width == 1) out.dgk[t] = total;
        else std::copy(w.dgk.begin(), w.dgk.end(), out.dgk + t * dk);
      }
    }
  }
  // After step 1, G holds Dv_1 G_1 Dk_1 = dL/dS_0.
  if (out.ds0) std::copy(w.grad.begin(), w.grad.end(), out.ds0);
}

void forward(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& gk_, const Tensor& gv_,
             const Tensor& s0_, const Tensor& out, const Tensor& final_state) {
  const Inputs in(q_, k_, v_, gk_, gv_, s0_);
  const int64_t dk = in.dk, dv = in.dv, steps = in.steps;
  dispatch_floating(in.q.dtype(), "gated_scan", [&]<class T>() {
    parallel_for(in.tasks, 1, [&](int64_t begin, int64_t end) {
      std::vector<T> state(static_cast<size_t>(dv * dk)), ek(static_cast<size_t>(dk)), ev(static_cast<size_t>(dv));
      for (int64_t b = begin; b < end; ++b) {
        const Task<T> task = in.task<T>(b);
        T *o = out.data<T>() + b * steps * dv, *f = out_of<T>(final_state, b, dv * dk);
        if (task.decays()) forward_task<T, true>(task, o, f, state.data(), ek.data(), ev.data());
        else forward_task<T, false>(task, o, f, state.data(), ek.data(), ev.data());
      }
    });
  });
}

void backward(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& gk_, const Tensor& gv_,
              const Tensor& s0_, const Tensor& dout_, const Tensor& dfinal_, const Tensor& dq, const Tensor& dk_out,
              const Tensor& dv_out, const Tensor& dgk, const Tensor& dgv, const Tensor& ds0) {
  const Inputs in(q_, k_, v_, gk_, gv_, s0_);
  const Tensor dout = contiguous_copy(dout_);
  const Tensor dfinal = dfinal_.defined() ? contiguous_copy(dfinal_) : dfinal_;
  const int64_t dk = in.dk, dv = in.dv, steps = in.steps, size = dv * dk;
  dispatch_floating(in.q.dtype(), "gated_scan_backward", [&]<class T>() {
    parallel_for(in.tasks, 1, [&](int64_t begin, int64_t end) {
      BackwardScratch<T> scratch(steps, dk, dv);
      for (int64_t b = begin; b < end; ++b) {
        const Task<T> task = in.task<T>(b);
        const TaskGrads<T> grads{dout.data<T>() + b * steps * dv,
                                 dfinal.defined() ? dfinal.data<T>() + b * size : nullptr,
                                 out_of<T>(dq, b, steps * dk),
                                 out_of<T>(dk_out, b, steps * dk),
                                 out_of<T>(dv_out, b, steps * dv),
                                 out_of<T>(dgk, b, steps * task.gk_width),
                                 out_of<T>(dgv, b, steps * task.gv_width),
                                 out_of<T>(ds0, b, size)};
        if (task.decays()) backward_task<T, true>(task, grads, scratch);
        else backward_task<T, false>(task, grads, scratch);
      }
    });
  });
}

}  // namespace

// One kernel serves both algorithms: on the CPU the sequential one is the fast one. It writes
// contiguous outputs and keeps nothing for the backward, which recomputes. A bfloat16 scan
// (bfloat16 q, k, v and dout; float32 decays and states) runs the float32 kernel on the widened
// activations and rounds its bfloat16 results once (tensor/widen.h): the reference of the CUDA one.
void CpuBackend::gated_scan(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk, const Tensor& gv,
                            const Tensor& s0, const Tensor& out, const Tensor& final_state, ScanAlgorithm,
                            Tensor*) const {
  Float32StandIns f32(*this);
  const Tensor q32 = f32.input(q), k32 = f32.input(k), v32 = f32.input(v), out32 = f32.output(out);
  with_contiguous_outputs(*this, {&out32, &final_state},
                          [&](const std::vector<Tensor>& o) { forward(q32, k32, v32, gk, gv, s0, o[0], o[1]); });
  f32.narrow_outputs();
}

void CpuBackend::gated_scan_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& gk,
                                     const Tensor& gv, const Tensor& s0, const Tensor& dout, const Tensor& dfinal,
                                     const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dgk,
                                     const Tensor& dgv, const Tensor& ds0, ScanAlgorithm, const Tensor&) const {
  Float32StandIns f32(*this);
  const Tensor q32 = f32.input(q), k32 = f32.input(k), v32 = f32.input(v), dout32 = f32.input(dout);
  const Tensor dq32 = f32.output(dq), dk32 = f32.output(dk), dv32 = f32.output(dv);
  with_contiguous_outputs(*this, {&dq32, &dk32, &dv32, &dgk, &dgv, &ds0}, [&](const std::vector<Tensor>& g) {
    backward(q32, k32, v32, gk, gv, s0, dout32, dfinal, g[0], g[1], g[2], g[3], g[4], g[5]);
  });
  f32.narrow_outputs();
}

}  // namespace linea::cpu
