"""Where a chunked-scan block's cycles go, phase by phase: patches a copy of the tree so that the
per-chunk kernels (cuda/kernels/chunked_scan_kernels.cuh) stamp clock64 at each phase boundary
(thread 0 of each block; the boundaries are mostly block barriers) and each launch's last block
prints the average cycles per block of every phase. Not part of the build, and not for timing: the
stamps' atomics make a launch about a fifth slower. Each patch names the code it goes after, and
the script stops with that text when the kernels have changed under it.

On the GPU machine, from the repository root (the copy builds in /tmp/probe):
  rm -rf /tmp/probe && mkdir /tmp/probe
  git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} cp --parents {} /tmp/probe/
  python3 tools/gpu/phase_probe.py /tmp/probe
  (cd /tmp/probe && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINEA_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C build linea_cli)
  /tmp/probe/build/tools/linea bench scan --device cuda --what kernel --algorithms chunked \
     --state-passes chain --lengths 16384 --repeats 1 | grep phases
Phases (each from the stamp before it; "prepare" splits prepare_chunk):
  ticket, prepare, update (the chain's U or W), pass (pass_state: the chain's link), then the body's
  products and stores in order; prepare: issue (the loads issued), decays (their wait), sums
  (column_share), factors (exp(L), exp(-L), the update's factors), tiles (their wait), operands
  (the factored, rounded tiles written).
"""
import sys

PHASES = {  # kernel: the names of stamps 1.. (stamp 0 is the block's start)
    "output": ["ticket", "prepare", "update", "scores", "A v", "pass", "q h", "store"],
    "gradient": ["ticket", "prepare", "update", "pass", "state terms", "value scores", "dv", "dv store + dgv",
                 "key scores + dA k + do h", "dq store", "dk + store", "dgk"],
}
PREPARE = ["issue", "decays", "sums", "factors", "tiles", "operands"]  # stamps 16..21

DEVICE = r'''
static __device__ unsigned long long g_phase_cycles[2][32];
static __device__ unsigned g_phase_blocks[2];
static __device__ __forceinline__ long long* phase_stamps() { __shared__ long long stamps[32]; return stamps; }
#define PHASE(i) do { if (threadIdx.x == 0) phase_stamps()[i] = clock64(); } while (0)
// Adds this chunk's phases (stamps 1 .. n - 1, and prepare_chunk's 16 .. 21 after stamp 1); the
// launch's last chunk of `chunks` prints the averages and clears the sums for the next launch.
static __device__ __noinline__ void phase_report(int kernel, int n, long long chunks) {
  if (threadIdx.x != 0) return;
  const long long* st = phase_stamps();
  for (int i = 1; i < n; ++i) atomicAdd(&g_phase_cycles[kernel][i], (unsigned long long)(st[i] - st[i - 1]));
  for (int i = 16; i < 22; ++i)
    atomicAdd(&g_phase_cycles[kernel][i], (unsigned long long)(st[i] - st[i == 16 ? 1 : i - 1]));
  __threadfence();
  if (atomicAdd(&g_phase_blocks[kernel], 1u) != chunks - 1) return;
  __threadfence();
  printf("phases %s %lld chunks, %u blocks:", kernel ? "gradient" : "output", chunks, gridDim.x);
  for (int i = 1; i < 22; ++i) {
    if (i < n || i >= 16) printf(" %d=%llu", i, g_phase_cycles[kernel][i] / chunks);
    g_phase_cycles[kernel][i] = 0;
  }
  printf("\n");
  g_phase_blocks[kernel] = 0;
}
'''

ISSUED = ("    if (!kChained) load_state_tile<T, N, P>(s.dh, state_tile(a.dstates, p, a.dstate_slots, p.index));\n"
          "  }\n  cp_async_commit();\n  cp_async_wait_all_but_last();\n  __syncthreads();\n")
# (the code a stamp goes after, the stamps; None: the stamp goes inside it, INSIDE): every anchor
# must occur exactly once.
AFTER = [
    ("constexpr double kMildLogDecay = 64.0;\n", DEVICE),
    # for_block_chunk: a chunk's ticket phase runs from the block's start, or from the end of the
    # persistent block's chunk before
    ("  const ChunkTiles<T> s(smem_bytes, backward);\n", "  PHASE(0);\n"),
    ("      ticket = next_ticket;\n", "      PHASE(0);\n"),
    ("    if (prepare_chunk<kProducts, kChained>(s, a, p, backward)) body(s, p, std::true_type{}, next);\n", None),
    # prepare_chunk
    (ISSUED, None),
    ("  const bool mild = __syncthreads_and(x.total.as_double() >= -kMildLogDecay);\n", "  PHASE(18);\n"),
    ("      if constexpr (ScaleFactors<T>::kKeepsInverse) still.down[still.at(x.t0 + i, x.c)] = T(1);\n    }\n  }\n",
     "  PHASE(19);\n"),
    ("  cp_async_wait_all();\n  __syncthreads();\n  if (x.mode != kNoDecay || kRound) {", None),
    ("  round_state_tiles<kProducts, kChained>(s, backward);\n  __syncthreads();\n  return true;\n", None),
    # chunk_output_body
    ("    chunk_update<kProducts>(update, a.value_mode == kNoDecay ? s.v : s.z, "
     "a.key_mode == kNoDecay ? s.k : s.w, w);\n",
     "    PHASE(3);\n"),
    ("  score_stripe<kProducts>(stripe, diag, s.q, s.k, key_p, w);\n  zero(o);\n", "  PHASE(4);\n"),
    ("  decayed_product<kProducts, true>(o, s.stripes, s.v, value_p, w);\n", "  PHASE(5);\n"),
    ("  if constexpr (kChained) pass_state<false, kProducts>(update, s.h, s, a, p);\n", "  PHASE(6);\n"),
    ("  through_state<kProducts, false>(inter, s.q, key_p, s.h, w, false);\n", "  PHASE(7);\n"),
    ("  store_rows(o, a.out, p, p.kt, w, a.steps, kWidth * p.vt, a.dv);\n",
     "  PHASE(8);\n  phase_report(0, 9, chunk_count(a));\n"),
    # chunk_gradient_body
    ("                            kMild || a.key_mode == kNoDecay ? s.q : s.w, warp_part());\n", "    PHASE(3);\n"),
    ("    pass_state<true, kProducts>(update, s.dh, s, a, p);\n", "    PHASE(4);\n"),
    ("    (key_side ? s.gk_state : s.gv_state)[part * kWidth + c] = sum;\n  }\n", "  PHASE(5);\n"),
    ("    score_stripe<kProducts>(stripe, diag, s.q, s.k, key_p, w);\n    zero(terms.w);\n  }\n", "  PHASE(6);\n"),
    ("s.v, s.dout, value_p, value);  // dv\n", "  PHASE(7);\n"),
    ("                       a.value_mode == kScalarDecay ? scalar_part : p.kt, a.steps, vc, a.dv, s.w);\n",
     "  PHASE(8);\n"),
    ("s.dout, s.v, value_p, s.k, key_p, w);  // dA = do v^T\n", None),
    ("  store_rows(acc, a.grad_q, p, p.vt, w, a.steps, kc, a.dk);\n", "  PHASE(10);\n"),
    ("  store_rows(acc, a.grad_k, p, p.vt, w, a.steps, kc, a.dk);\n", "  PHASE(11);\n"),
    ("                       a.key_mode == kScalarDecay ? scalar_part : p.vt, a.steps, kc, a.dk, s.z);\n",
     "  PHASE(12);\n  phase_report(1, 13, chunk_count(a));\n"),
]
# Stamps that go inside the anchored text rather than after it.
INSIDE = {
    ISSUED: ISSUED.replace("  cp_async_wait_all_but_last();", "  PHASE(16);\n  cp_async_wait_all_but_last();") +
            "  PHASE(17);\n",
    "    if (prepare_chunk<kProducts, kChained>(s, a, p, backward)) body(s, p, std::true_type{}, next);\n":
        "    PHASE(1);\n    const bool mild = prepare_chunk<kProducts, kChained>(s, a, p, backward);\n    PHASE(2);\n"
        "    if (mild) body(s, p, std::true_type{}, next);\n",
    "  cp_async_wait_all();\n  __syncthreads();\n  if (x.mode != kNoDecay || kRound) {":
        "  cp_async_wait_all();\n  __syncthreads();\n  PHASE(20);\n  if (x.mode != kNoDecay || kRound) {",
    "  round_state_tiles<kProducts, kChained>(s, backward);\n  __syncthreads();\n  return true;\n":
        "  round_state_tiles<kProducts, kChained>(s, backward);\n  __syncthreads();\n  PHASE(21);\n  return true;\n",
    "s.dout, s.v, value_p, s.k, key_p, w);  // dA = do v^T\n":
        "s.dout, s.v, value_p, s.k, key_p, w);  // dA = do v^T\n  PHASE(9);\n",
}


def main():
    path = sys.argv[1] + "/cuda/kernels/chunked_scan_kernels.cuh"
    text = open(path).read()
    for anchor, stamp in AFTER:
        if text.count(anchor) != 1:
            sys.exit(f"phase_probe: the kernels changed; expected this once:\n{anchor}")
        text = text.replace(anchor, INSIDE[anchor] if stamp is None else anchor + stamp)
    open(path, "w").write(text)
    legend = [f"{k}: " + ", ".join(f"{i}={n}" for i, n in enumerate(v, 1)) for k, v in PHASES.items()]
    legend.append("prepare: " + ", ".join(f"{i}={n}" for i, n in enumerate(PREPARE, 16)))
    print("phase_probe: stamps in place;", "; ".join(legend))


if __name__ == "__main__":
    main()
