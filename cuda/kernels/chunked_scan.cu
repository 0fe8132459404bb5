// The chunked gated scan's entry points (gated_scan.h): inputs whose rows are not contiguous are
// copied, then the kernels of chunked_scan_kernels.cuh run in the precision of the inputs, on the
// TF32 tensor cores for float32 while TF32 is on (cuda::set_tf32, LINEA_TF32, as for cuBLAS), on
// the bfloat16 ones for a bfloat16 scan (bfloat16 q, k, v, dout, o, dq, dk, dv read and written in
// place; float32 decays and states).
#include <atomic>
#include <cstdlib>
#include <type_traits>

#include "cuda/backend.h"
#include "cuda/cuda_backend.h"
#include "cuda/kernels/chunked_scan.h"

namespace linea::cuda {

namespace {

// The layers' (B, T, H, d) projections seen as (B, H, T, d) are read in place.
Tensor readable(const Tensor& x) {
  if (!x.defined() || x.size(3) == 1 || x.stride(3) == 1) return x;
  return contiguous_copy(x);
}

// Calls f.template operator()<T, kProducts>() for the inputs' dtype: a bfloat16 scan on the
// bfloat16 tensor cores (float32 tiles, its bfloat16 tensors read and written in place), float32
// on the TF32 ones while TF32 is on, else exact.
template <class F>
void with_precision(const Tensor& q, const char* op, F&& f) {
  const bool mma = chunked_scan_tf32_available();
  if (q.dtype() == kBFloat16) {
    if (mma) f.template operator()<float, chunked::Products::kBF16>();
    else f.template operator()<float, chunked::Products::kExact>();
    return;
  }
  dispatch_floating(q.dtype(), op, [&]<class T>() {
    if constexpr (std::is_same_v<T, float>) {
      if (mma && tf32_enabled()) f.template operator()<float, chunked::Products::kTF32>();
      else f.template operator()<float, chunked::Products::kExact>();
    } else {
      f.template operator()<T, chunked::Products::kExact>();
    }
  });
}

}  // namespace

bool chunked_scan_tf32_available() { return chunked::tf32_available(); }

namespace {
// -1 until first asked: then LINEA_SCAN_STATES decides (set_scan_state_pass overrides it).
std::atomic<int> g_scan_state_pass{-1};
}  // namespace

void set_scan_state_pass(ScanStatePass pass) { g_scan_state_pass.store(static_cast<int>(pass)); }

ScanStatePass scan_state_pass() {
  int state = g_scan_state_pass.load();
  if (state < 0) {
    const char* env = std::getenv("LINEA_SCAN_STATES");
    ScanStatePass from_env = ScanStatePass::kAuto;
    if (env != nullptr && !scan_state_pass_named(env, &from_env))
      fail("gated_scan", "LINEA_SCAN_STATES must be 'auto', 'kernels' or 'chain', got '", env, "'");
    g_scan_state_pass.compare_exchange_strong(state, static_cast<int>(from_env));  // a concurrent set wins
    state = g_scan_state_pass.load();
  }
  return static_cast<ScanStatePass>(state);
}

namespace {
std::atomic<int> g_scan_persistent_blocks{0};
}  // namespace

void set_scan_persistent_blocks(int most) { g_scan_persistent_blocks.store(most < 0 ? 0 : most); }
int scan_persistent_blocks() { return g_scan_persistent_blocks.load(); }

void chunked_scan_forward(const ScanTensors& in, const Tensor& out, const Tensor& final_state, Tensor* kept,
                          int device, cudaStream_t stream) {
  const Tensor q = readable(in.q), k = readable(in.k), v = readable(in.v), gk = readable(in.gk), gv = readable(in.gv);
  const ScanTensors rows{q, k, v, gk, gv, in.s0};
  with_precision(q, "gated_scan", [&]<class T, chunked::Products kProducts>() {
    chunked::forward<T, kProducts>(rows, out, final_state, kept, device, stream);
  });
}

void chunked_scan_backward(const ScanTensors& in, const Tensor& dout, const Tensor& dfinal, const ScanGrads& grads,
                           const Tensor& kept, int device, cudaStream_t stream) {
  const Tensor q = readable(in.q), k = readable(in.k), v = readable(in.v), gk = readable(in.gk), gv = readable(in.gv);
  const ScanTensors rows{q, k, v, gk, gv, in.s0};
  const Tensor dout_rows = readable(dout);
  with_precision(q, "gated_scan_backward", [&]<class T, chunked::Products kProducts>() {
    chunked::backward<T, kProducts>(rows, dout_rows, dfinal, grads, kept, device, stream);
  });
}

}  // namespace linea::cuda
