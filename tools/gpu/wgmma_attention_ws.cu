// Does a warp-specialised causal attention forward (FlashAttention-3's structure: a producer
// warpgroup loading key/value tiles into a ring of shared-memory stages, consumer warpgroups
// taking turns at the tensor cores so that one's softmax runs while another's products do) beat
// the plain wgmma forward of wgmma_attention.cu? A stand-alone prototype on wgmma.cuh and
// attention_forward_common.cuh; not part of the build. On an sm_90 GPU, from the repository root,
// with the plain kernel's timings in the same run:
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -Xptxas -v -o /tmp/ws tools/gpu/wgmma_attention_ws.cu && /tmp/ws
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -o /tmp/plain tools/gpu/wgmma_attention.cu && /tmp/plain
//
// The kernel (attention_ws below): B H = 64 heads of (T, 64) bfloat16, causal, float32
// accumulation and softmax, bfloat16 out (and the log-sum-exp). A block is 1 + kConsumers
// warpgroups (384 or 512 threads, one block a multiprocessor) and kConsumers x 64 query rows of
// one (batch, head), the longest query tiles first; grid (T / rows, B H).
//   producer (warpgroup 0): key and value tiles of 128 keys (16 KB each, 128-byte swizzle) into
//     a ring of kStages stages with cp.async (rows past T zero-filled), one "full" mbarrier and one
//     "empty" mbarrier a stage; setmaxnreg.dec to 40 (or 32) registers.
//   consumers (warpgroups 1 ..): each loads its own 64-row Q tile once, then per key tile: wait
//     "full", S = Q K^T (4 x m64n128k16, both from shared memory), online softmax in registers
//     (exp2, scale folded in, causal mask on its diagonal tile only; tiles past its diagonal are
//     skipped but still released), P as bfloat16 A fragments, O += P V (8 x m64n64k16, V
//     N-major), arrive "empty"; setmaxnreg.inc to 232 (2 consumers) or 160 (3).
//   turns ("pingpong"): named barriers 1 .. kConsumers (bar.sync id, 256 / bar.arrive id, 256);
//     consumer c waits for its turn, issues its products, passes the turn on, then waits for its
//     products and runs its softmax while the next consumer's products run. In the "both" form a
//     turn issues P V(kt - 1) and S(kt) together, so all of a consumer's tensor work sits in its
//     turn; the "S" form puts only S in the turn.
// Checked against the float32 reference kernel (attention_forward_common.cuh) at T = 320, 200
// and 77 (partial last tiles), largest |out - ref| / (1 + |ref|); then timed at T = 1k, 4k, 16k,
// B = H = 8 (20 launches after 2 warm-ups, CUDA events).
//
// Results on an H200 (nvcc 13, 2026-11-29), forward ms, one run (this file, then
// wgmma_attention.cu in the same command). "2c": 2 consumer warpgroups, 128 query rows a block;
// "3c": 3 consumers, 192 rows; "3st": three stages; r40/232: setmaxnreg producer/consumer.
//   variant                                  1k       4k       16k     registers (launch), spills
//   plain 128-key tiles (wgmma_attention)  0.0518   0.5324   7.6099  (3 blocks x 1 warpgroup an SM)
//   2c free 3st (no turns)                 0.0790   0.8462  11.9377  160, none
//   2c pingpong-S 3st r40/232              0.0746   0.7647  10.6195  168, none
//   2c pingpong-both 3st r40/232           0.0729   0.7385  10.1439  168, none
//   2c pingpong+intra 3st r40/232 (mode 3) 0.1087   1.2033  16.9902  168, none; ptxas C7513 serialises
//   3c free 3st r32/160                    0.0839   0.7533   9.8391  128, 16 B spill stores
//   3c turns-both 3st r32/160              0.0840   0.7421   9.6544  128, 8 B spill stores
//   3c turns-both 4st r32/160 kSync 2      0.0838   0.7403   9.6354  128, 76 B spill stores
// Parity: every variant 0.0021 - 0.0029 at T = 320, 200, 77 (the plain kernel in the same run:
// 0.0021 - 0.0031). Registers: "launch" is what ptxas reports for the kernel (384 x 168 or
// 512 x 128); setmaxnreg then moves them to the consumers; where the 3c spills sit (producer at
// 32 or consumers at 160) ptxas does not say. Earlier runs of the same session, same GPU, 16k:
// 2, 3 and 4 stages within 2.5% of each other; the 2c pingpong-both kernel without setmaxnreg
// 10.19 ms (first version, 154 registers, no spills) and 10.67 ms (this version, 168 registers,
// 20 B spills); one "empty" arrival a warp instead of a thread (kSync 1) 5% slower; the late
// per-warp "full" arrival (kSync 2) 12% slower with three stages, equal with four; conditions
// around the products inside the consumer loop (instead of a separate first and last turn)
// 12.74 ms, and 13.59 ms with the producer's copies not unrolled as well.
//
// What it means: no. The warp-specialised forward is correct but 27% (3c, 9.64 ms) to 33% (2c
// pingpong, 10.14 ms) slower than the plain 128-key kernel at 16k, 39% slower at 4k and 41 - 62%
// at 1k (one 384/512-thread block a multiprocessor: coarse blocks and a pipeline to fill at
// short T). Pingpong does what it should against the same structure without turns (2c: 11.94 ->
// 10.14 ms, -15%; 3c: 9.84 -> 9.65 ms, -2%), and more consumer warps help more (2c -> 3c). The
// likely reading (not profiled): the consumers are bound by the latency of their own softmax
// chains, not by the tensor cores, and the plain kernel already gets this overlap for free from
// three independent blocks a multiprocessor (12 warps whose products and softmaxes interleave),
// without a producer's warps, mbarrier round trips or turn barriers; at head dim 64 a 64 x 128
// tile's tensor work is short next to its softmax, so handing the tensor cores back and forth
// saves little. What would be needed to win: the softmax of S(kt + 1) under P V(kt) inside one
// consumer (the intra-warpgroup overlap) without ptxas serialising it (C7513 here, C7514 in
// wgmma_attention.cu: the softmax writes the other P register set, or reads S, while a product
// group is open; operand fences or an order ptxas accepts), fewer softmax instructions a score,
// TMA instead of per-thread cp.async for the producer, and an ncu profile (stall reasons) of
// the 3c kernel against the plain one before more variants. Until then the plain kernel stays
// the plan for linea's sm_90 forward.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "attention_forward_common.cuh"

namespace {

using namespace attention_probe;

constexpr int kKeys = 128;               // keys a tile
constexpr int kTileBytes = kKeys * 128;  // one 128 x 64 bfloat16 tile, 16 KB

// ---- synchronisation helpers (mbarriers, named barriers, register reallocation) --------------

__device__ inline uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ inline void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ inline void mbar_arrive(uint64_t* bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(smem_u32(bar))
               : "memory");
}
// Spins until the phase of parity `parity` of the barrier has completed.
__device__ inline void mbar_wait(uint64_t* bar, int parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
// One arrival on the barrier once every cp.async this thread issued so far has landed (.noinc:
// the arrival counts towards the barrier's expected count).
__device__ inline void cp_async_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
__device__ inline void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ inline void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
template <int kRegs>
__device__ inline void regs_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs)); }
template <int kRegs>
__device__ inline void regs_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs)); }

// Rows [row0, row0 + kRows) of a (T, 64) bfloat16 matrix into a swizzled tile by the 128 threads
// of one warpgroup (tid: 0 .. 127); rows past T read as 0. Thread tid copies 16-byte chunk tid % 8
// of rows tid / 8 + 16 i: rows 16 apart have the same swizzle (it repeats every 8 rows), so its
// destinations are one offset plus 2048 i, and the copies unroll to a few instructions each (the
// producer runs on few registers, and its issue rate showed in the timings).
template <int kRows>
__device__ inline void load_rows(unsigned char* tile, const bf16* matrix, int row0, int T, int tid) {
  const int r = tid / 8, c = (tid % 8) * 8;
  unsigned char* const dst = tile + swizzled(r, c);
  const bf16* const src = matrix + (size_t)(row0 + r) * 64 + c;
#pragma unroll
  for (int i = 0; i < kRows / 16; ++i) {
    const bool in = row0 + r + 16 * i < T;
    cp_async16(dst + 2048 * i, in ? src + 1024 * i : matrix, in ? 16 : 0);
  }
}

// ---- the warp-specialised kernel --------------------------------------------------------------

// q, k, v, out: (B H, T, 64) bfloat16; lse: (B H, T) float32. Causal. Block: kConsumers x 64 query
// rows (query tile qt, the longest first) and key tiles 0 .. the one of its last row; warpgroup 0
// loads them, consumer warpgroup c takes rows 64c .. 64c + 63 and skips the key tiles past its
// own diagonal one (still taking its turns and releasing the stages).
// kStages: K/V stages in the ring. kMode: 0 no pingpong (the consumers run freely); 1 turns on S
// only (a turn = issue S(kt)); 2 turns on both products (a turn = issue P V(kt - 1) and S(kt);
// softmax(kt) after both completed); 3 as 2 plus FlashAttention-3's order inside the consumer
// (softmax(kt) while P V(kt - 1) runs; ptxas serialises it, note C7513). Turns go round the
// consumers in order (named barriers 1 .. kConsumers). kProducerRegs / kConsumerRegs: setmaxnreg
// targets (0: none). kSync: 0 every producer thread arrives on "full" as its cp.asyncs land
// (cp.async.mbarrier.arrive.noinc) and every consumer thread on "empty"; 1 one "empty" arrival a
// consumer warp; 2 that and one "full" arrival a producer warp, a tile late (cp.async.wait_group 1,
// fence.proxy.async, arrive), which needs three stages.
template <int kConsumers, int kStages, int kMode, int kProducerRegs, int kConsumerRegs, int kSync>
__global__ void __launch_bounds__(128 * (kConsumers + 1), 1)
    attention_ws(const bf16* q, const bf16* k, const bf16* v, bf16* out, float* lse, int T, float scale) {
  constexpr int kRowsBlock = 64 * kConsumers;
  __shared__ __align__(8) uint64_t full[kStages], empty[kStages];
  unsigned char* const sQ = aligned_smem();
  auto sK = [&](int stage) { return sQ + kRowsBlock * 128 + stage * 2 * kTileBytes; };
  auto sV = [&](int stage) { return sQ + kRowsBlock * 128 + stage * 2 * kTileBytes + kTileBytes; };
  const int qt = gridDim.x - 1 - blockIdx.x;
  const int row0 = qt * kRowsBlock;
  const int last_kt = (min(row0 + kRowsBlock, T) - 1) / kKeys;
  const size_t head = (size_t)blockIdx.y * T;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  static_assert(kSync < 2 || kStages >= 3, "the producer's lagging arrival needs three stages");

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], kSync == 2 ? 4 : 128);
      mbar_init(&empty[s], kSync >= 1 ? 4 * kConsumers : 128 * kConsumers);
    }
  }
  if (wg > 0) {
    load_rows<64>(sQ + (wg - 1) * 8192, q + head * kD, row0 + (wg - 1) * 64, T, tid);
    cp_async_commit();
  }
  __syncthreads();

  if (wg == 0) {  // producer
    if constexpr (kProducerRegs > 0) regs_dec<kProducerRegs>();
    for (int kt = 0; kt <= last_kt; ++kt) {
      const int s = kt % kStages;
      if (kt >= kStages) mbar_wait(&empty[s], (kt / kStages - 1) & 1);
      load_rows<kKeys>(sK(s), k + head * kD, kt * kKeys, T, tid);
      load_rows<kKeys>(sV(s), v + head * kD, kt * kKeys, T, tid);
      if constexpr (kSync == 2) {  // tile kt - 1 complete in every lane, then one arrival a warp
        cp_async_commit();
        if (kt >= 1) {
          cp_async_wait<1>();
          fence_async_shared();
          __syncwarp();
          if (tid % 32 == 0) mbar_arrive(&full[(kt - 1) % kStages]);
        }
      } else {
        cp_async_arrive(&full[s]);
      }
    }
    cp_async_commit();
    cp_async_wait<0>();
    if constexpr (kSync == 2) {
      fence_async_shared();
      __syncwarp();
      if (tid % 32 == 0) mbar_arrive(&full[last_kt % kStages]);
    }
    return;
  }

  if constexpr (kConsumerRegs > 0) regs_inc<kConsumerRegs>();
  const int c = wg - 1;
  unsigned char* const sQc = sQ + c * 8192;
  cp_async_wait<0>();
  fence_async_shared();
  named_sync(kConsumers + 1 + c, 128);  // this warpgroup's Q tile is in

  const int warp = tid / 32, g = tid % 32 / 4;
  const float scale_log2 = scale * 1.4426950408889634f;
  RowState st;
  st.row[0] = row0 + 64 * c + 16 * warp + g;
  st.row[1] = st.row[0] + 8;
  // The consumer's last key tile: the one holding its first row (masked there), or the block's
  // last (keys past T masked) when its rows start past T.
  const int mine_last = min((row0 + 64 * c) / kKeys, last_kt);
  float o[32] = {}, s[kKeys / 2] = {};
  uint32_t p[kKeys / 16][4];
  float alpha[2];
  const int me = 1 + c, next = 1 + (c + 1) % kConsumers;  // named barrier 1 + c: "consumer c's turn"
  if (kMode > 0 && c == kConsumers - 1) named_arrive(1, 256);  // consumer 0 goes first

  auto release = [&](int kt) {  // this warp (kSync >= 1) or thread is done with tile kt's stage
    if constexpr (kSync >= 1) {
      __syncwarp();
      if (tid % 32 == 0) mbar_arrive(&empty[kt % kStages]);
    } else {
      mbar_arrive(&empty[kt % kStages]);
    }
  };
  auto wait_full = [&](int kt) {
    mbar_wait(&full[kt % kStages], (kt / kStages) & 1);
    fence_async_shared();
  };
  auto issue_s = [&](int kt) {
    unsigned char* const tile = sK(kt % kStages);
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks)
      product_ss<kKeys, 0>(s, descriptor(sQc + 32 * ks), descriptor(tile + 32 * ks), ks);
  };
  auto issue_pv = [&](int kt) {
    unsigned char* const tile = sV(kt % kStages);
#pragma unroll
    for (int ks = 0; ks < kKeys / 16; ++ks) product_rs<1>(o, p[ks], descriptor(tile + 2048 * ks));
  };
  auto soft = [&](int kt) {
    softmax_tile<kKeys>(s, p, alpha, st, kt, kt == mine_last, T, scale_log2);
#pragma unroll
    for (int i = 0; i < 32; ++i) o[i] *= alpha[(i % 4) / 2];
  };
  auto first_turn = [&] {  // the pingpong forms' first turn: S(0) alone, waited for
    wait_full(0);
    named_sync(me, 256);
    wgmma_fence();
    issue_s(0);
    wgmma_commit();
    named_arrive(next, 256);
    wgmma_wait<0>();
  };
  if constexpr (kMode == 3) {
    // FlashAttention-3's order inside each consumer, with the turns: turn kt issues S(kt), then
    // P V(kt - 1) as a second group; the softmax of S(kt) runs while P V(kt - 1) does (wait for
    // one group), into the other P register set; then O is rescaled. Unrolled by two for the sets.
    uint32_t p2[kKeys / 16][4];
    float alpha2[2];
    first_turn();
    softmax_tile<kKeys>(s, p, alpha, st, 0, 0 == mine_last, T, scale_log2);
    auto step = [&](uint32_t (&pc)[kKeys / 16][4], uint32_t (&pn)[kKeys / 16][4], float (&an)[2], int kt) {
      wait_full(kt);
      named_sync(me, 256);
      wgmma_fence();
      issue_s(kt);
      wgmma_commit();
      {
        unsigned char* const tile = sV((kt - 1) % kStages);
#pragma unroll
        for (int ks = 0; ks < kKeys / 16; ++ks) product_rs<1>(o, pc[ks], descriptor(tile + 2048 * ks));
      }
      wgmma_commit();
      named_arrive(next, 256);
      wgmma_wait<1>();
      softmax_tile<kKeys>(s, pn, an, st, kt, kt == mine_last, T, scale_log2);
      wgmma_wait<0>();
      release(kt - 1);
#pragma unroll
      for (int i = 0; i < 32; ++i) o[i] *= an[(i % 4) / 2];
    };
    int kt = 1;
    for (; kt + 1 <= mine_last; kt += 2) {
      step(p, p2, alpha2, kt);
      step(p2, p, alpha, kt + 1);
    }
    if (kt <= mine_last) {  // one more tile; its P back into p
      step(p, p2, alpha2, kt);
#pragma unroll
      for (int ks = 0; ks < kKeys / 16; ++ks)
#pragma unroll
        for (int j = 0; j < 4; ++j) p[ks][j] = p2[ks][j];
    }
    if (mine_last + 1 <= last_kt) wait_full(mine_last + 1);
    named_sync(me, 256);
    wgmma_fence();
    {
      unsigned char* const tile = sV(mine_last % kStages);
#pragma unroll
      for (int ks = 0; ks < kKeys / 16; ++ks) product_rs<1>(o, p[ks], descriptor(tile + 2048 * ks));
    }
    wgmma_commit();
    named_arrive(next, 256);
    wgmma_wait<0>();
    release(mine_last);
    for (int kt = mine_last + 2; kt <= last_kt + 1; ++kt) {
      if (kt <= last_kt) wait_full(kt);
      named_sync(me, 256);
      named_arrive(next, 256);
      release(kt - 1);
    }
  } else if constexpr (kMode == 2) {
    // Turn kt issues P V(kt - 1) and S(kt); the loop body has no conditions around the products.
    first_turn();
    soft(0);
    for (int kt = 1; kt <= mine_last; ++kt) {
      wait_full(kt);
      named_sync(me, 256);
      wgmma_fence();
      issue_pv(kt - 1);
      issue_s(kt);
      wgmma_commit();
      named_arrive(next, 256);
      wgmma_wait<0>();
      release(kt - 1);
      soft(kt);
    }
    if (mine_last + 1 <= last_kt) wait_full(mine_last + 1);
    named_sync(me, 256);
    wgmma_fence();
    issue_pv(mine_last);
    wgmma_commit();
    named_arrive(next, 256);
    wgmma_wait<0>();
    release(mine_last);
    for (int kt = mine_last + 2; kt <= last_kt + 1; ++kt) {  // tiles past this consumer's rows
      if (kt <= last_kt) wait_full(kt);
      named_sync(me, 256);
      named_arrive(next, 256);
      release(kt - 1);
    }
  } else {
    for (int kt = 0; kt <= mine_last; ++kt) {
      wait_full(kt);
      if (kMode == 1) named_sync(me, 256);
      wgmma_fence();
      issue_s(kt);
      wgmma_commit();
      if (kMode == 1) named_arrive(next, 256);
      wgmma_wait<0>();
      soft(kt);
      wgmma_fence();
      issue_pv(kt);
      wgmma_commit();
      wgmma_wait<0>();
      release(kt);
    }
    for (int kt = mine_last + 1; kt <= last_kt; ++kt) {  // tiles past this consumer's rows
      wait_full(kt);
      if (kMode == 1) {
        named_sync(me, 256);
        named_arrive(next, 256);
      }
      release(kt);
    }
  }
  if (kMode > 0 && c == 0) named_sync(1, 256);  // the last consumer's last arrival on barrier 1
  store_rows(o, st, out, lse, head, T);
}

using Kernel = void (*)(const bf16*, const bf16*, const bf16*, bf16*, float*, int, float);
struct Variant {
  const char* name;
  Kernel kernel;
  int consumers, stages;
};

void launch(const Variant& var, const Inputs& in) {
  const int rows = 64 * var.consumers;
  const int bytes = rows * 128 + var.stages * 2 * kTileBytes + 1024;
  CHECK(cudaFuncSetAttribute(var.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const dim3 grid((in.T + rows - 1) / rows, in.heads);
  var.kernel<<<grid, 128 * (var.consumers + 1), bytes>>>(in.q, in.k, in.v, in.out, in.lse, in.T,
                                                          1.f / std::sqrt(float(kD)));
  CHECK(cudaGetLastError());
}

}  // namespace

int main() {
  const Variant variants[] = {
      {"2c free 3st", attention_ws<2, 3, 0, 0, 0, 0>, 2, 3},
      {"2c pingpong-S 3st r40/232", attention_ws<2, 3, 1, 40, 232, 0>, 2, 3},
      {"2c pingpong-both 3st r40/232", attention_ws<2, 3, 2, 40, 232, 0>, 2, 3},
      {"2c pingpong+intra 3st r40/232", attention_ws<2, 3, 3, 40, 232, 0>, 2, 3},
      {"3c free 3st r32/160", attention_ws<3, 3, 0, 32, 160, 0>, 3, 3},
      {"3c turns-both 3st r32/160", attention_ws<3, 3, 2, 32, 160, 0>, 3, 3},
      {"3c turns-both 4st r32/160 sync2", attention_ws<3, 4, 2, 32, 160, 2>, 3, 4},
  };
  std::mt19937 rng(2026);
  for (int T : {320, 200, 77})
    for (const Variant& var : variants) {
      const double e = largest_error(T, rng, [&](const Inputs& in) { launch(var, in); });
      std::printf("parity T=%d %-36s largest error %.3g (%s)\n", T, var.name, e, e < 2e-2 ? "ok" : "WRONG");
    }
  for (int T : {1024, 4096, 16384}) {
    const int heads = 64;  // B = H = 8
    const Inputs in = make_inputs(heads, T, rng);
    const double flops = 4.0 * heads * double(T) * T / 2 * kD;
    for (const Variant& var : variants) {
      const double ms = time_ms(in, [&](const Inputs& inputs) { launch(var, inputs); });
      std::printf("{\"bench\":\"wgmma_attention_ws\",\"variant\":\"%s\",\"T\":%d,\"B\":8,\"H\":8,\"D\":64,"
                  "\"fwd_ms\":%.4f,\"tflops\":%.0f}\n",
                  var.name, T, ms, flops / ms / 1e9);
    }
    free_inputs(in);
  }
  return 0;
}
