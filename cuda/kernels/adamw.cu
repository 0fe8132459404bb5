// The AdamW step over many parameters in a few launches, against the CPU oracle
// (cpu/attention.cpp): a multi-tensor kernel in the manner of Apex's multi_tensor_apply.
// Each parameter is cut into chunks of kChunk elements and every block updates one chunk. The
// table saying which tensor and chunk each block takes (pointers to p, g, m, v, sizes, decay
// flags) travels as the kernel's parameter block, so a step needs no upload and no allocation:
// up to kMaxTensors tensors and kMaxBlocks chunks per launch (about 20M elements), a model of
// 150 tensors and 124M parameters in about 7 launches.
//
// The math is in the parameters' dtype (float32 for float32, as the moments are stored), with
// the bias corrections 1 / (1 - beta^t) and the decay factor 1 - lr * weight_decay computed once
// on the host in double.
#include <cmath>
#include <cstdint>

#include "cuda/kernels/rows.cuh"

namespace linea::cuda {

namespace {

constexpr int kMaxTensors = 24;   // fits a 32-bit decay mask
constexpr int kMaxBlocks = 320;   // keeps the parameter block under the 4 KB every GPU accepts
constexpr int64_t kChunk = 65536;
constexpr int kAdamThreads = 512;

template <class T>
struct AdamWTable {
  T* p[kMaxTensors];
  const T* g[kMaxTensors];
  T* m[kMaxTensors];
  T* v[kMaxTensors];
  int64_t n[kMaxTensors];
  uint32_t decay;  // bit i: tensor i takes weight decay
  uint8_t tensor_of_block[kMaxBlocks];
  int32_t chunk_of_block[kMaxBlocks];
};
static_assert(sizeof(AdamWTable<double>) + 128 <= 4096, "the table must fit the 4 KB parameter block");

template <class T>
struct AdamWScalars {
  T lr, beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  T inv_correction1, inv_correction2;  // 1 / (1 - beta^t)
  T shrink;                            // 1 - lr * weight_decay, for the tensors that decay
  T grad_scale;                        // the gradients are read multiplied by it (clipping)
};

//   g = grad_scale * grad;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p = p (1 - lr wd) - lr (m / c1) / (sqrt(v / c2) + eps)
template <class T>
__global__ void __launch_bounds__(kAdamThreads) adamw_kernel(const AdamWTable<T> table, const AdamWScalars<T> h) {
  const int t = table.tensor_of_block[blockIdx.x];
  const int64_t start = static_cast<int64_t>(table.chunk_of_block[blockIdx.x]) * kChunk;
  const int64_t end = start + kChunk < table.n[t] ? start + kChunk : table.n[t];
  T* __restrict__ p = table.p[t];
  const T* __restrict__ g = table.g[t];
  T* __restrict__ m = table.m[t];
  T* __restrict__ v = table.v[t];
  const T shrink = (table.decay >> t) & 1u ? h.shrink : T(1);
  // kUnroll elements per thread and pass, all loaded before any is stored: the loads of a pass are
  // in flight together (one element at a time left the kernel waiting on memory latency).
  constexpr int kUnroll = 4;
  for (int64_t base = start + threadIdx.x; base < end; base += kUnroll * kAdamThreads) {
    T gi[kUnroll], mi[kUnroll], vi[kUnroll], pi[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kAdamThreads;
      if (i < end) {
        gi[u] = g[i] * h.grad_scale;
        mi[u] = m[i];
        vi[u] = v[i];
        pi[u] = p[i];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + u * kAdamThreads;
      if (i >= end) break;
      const T mn = h.beta1 * mi[u] + h.one_minus_beta1 * gi[u];
      const T vn = h.beta2 * vi[u] + h.one_minus_beta2 * gi[u] * gi[u];
      m[i] = mn;
      v[i] = vn;
      p[i] = pi[u] * shrink - h.lr * (mn * h.inv_correction1) / (sqrt(vn * h.inv_correction2) + h.eps);
    }
  }
}

}  // namespace

void CudaBackend::adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                             const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                             const std::vector<bool>& decay, const AdamWHyper& hp) const {
  const size_t count = params.size();
  LINEA_CHECK(grads.size() == count && exp_avg.size() == count && exp_avg_sq.size() == count && decay.size() == count,
              "adamw_step", "needs one gradient, two moments and one decay flag per parameter, got ", count,
              " parameters, ", grads.size(), " gradients, ", exp_avg.size(), " and ", exp_avg_sq.size(),
              " moments, ", decay.size(), " flags");
  if (count == 0) return;
  LINEA_CHECK(hp.step >= 1, "adamw_step", "the step count starts at 1, got ", hp.step);
  const cudaStream_t stream = use_device(device_);
  const DType dtype = params[0].dtype();
  std::vector<Tensor> g(count);
  for (size_t i = 0; i < count; ++i) {
    check_on_device(device_, "adamw_step", {&params[i], &grads[i], &exp_avg[i], &exp_avg_sq[i]});
    for (const Tensor* t : {&params[i], &grads[i], &exp_avg[i], &exp_avg_sq[i]})
      LINEA_CHECK(t->dtype() == dtype && t->shape() == params[i].shape(), "adamw_step", "parameter ", i, " is ",
                  params[i].describe(), " but its gradient or a moment is ", t->describe(), " (parameter 0 is ",
                  dtype_name(dtype), ")");
    for (const Tensor* t : {&params[i], &exp_avg[i], &exp_avg_sq[i]})
      LINEA_CHECK(t->is_contiguous(), "adamw_step", "parameters and moments are updated as flat arrays; ",
                  t->describe(), " (parameter ", i, ") is not contiguous");
    g[i] = contiguous_copy(grads[i]);
  }
  const double correction1 = 1.0 - std::pow(hp.beta1, static_cast<double>(hp.step));
  const double correction2 = 1.0 - std::pow(hp.beta2, static_cast<double>(hp.step));
  dispatch_floating(dtype, "adamw_step", [&]<class T>() {
    const AdamWScalars<T> h{static_cast<T>(hp.lr),          static_cast<T>(hp.beta1),
                            static_cast<T>(1.0 - hp.beta1), static_cast<T>(hp.beta2),
                            static_cast<T>(1.0 - hp.beta2), static_cast<T>(hp.eps),
                            static_cast<T>(1.0 / correction1), static_cast<T>(1.0 / correction2),
                            static_cast<T>(1.0 - hp.lr * hp.weight_decay), static_cast<T>(hp.grad_scale)};
    AdamWTable<T> table{};
    int tensors = 0, blocks = 0;
    auto launch = [&] {
      if (blocks > 0) {
        adamw_kernel<T><<<blocks, kAdamThreads, 0, stream>>>(table, h);
        LINEA_CUDA_LAUNCH_CHECK("adamw_step", blocks, " chunks of ", tensors, " tensors");
      }
      tensors = blocks = 0;
      table.decay = 0;
    };
    auto add_tensor = [&](size_t i) {
      const int slot = tensors++;
      table.p[slot] = params[i].data<T>();
      table.g[slot] = g[i].data<T>();
      table.m[slot] = exp_avg[i].data<T>();
      table.v[slot] = exp_avg_sq[i].data<T>();
      table.n[slot] = params[i].numel();
      if (decay[i]) table.decay |= 1u << slot;
      return slot;
    };
    for (size_t i = 0; i < count; ++i) {
      const int64_t numel = params[i].numel();
      if (numel == 0) continue;
      if (tensors == kMaxTensors) launch();
      int slot = add_tensor(i);
      for (int64_t c = 0; c * kChunk < numel; ++c) {
        if (blocks == kMaxBlocks) {  // this tensor goes on in the next launch
          launch();
          slot = add_tensor(i);
        }
        table.tensor_of_block[blocks] = static_cast<uint8_t>(slot);
        table.chunk_of_block[blocks] = static_cast<int32_t>(c);
        ++blocks;
      }
    }
    launch();
  });
}

}  // namespace linea::cuda
