// Cross-entropy fused with the softmax of its logits, against the CPU oracle
// (cpu/softmax.cpp). logits (N, C), one row group per row (rows.cuh; a block of 1024
// threads for a vocabulary of 50257):
//   forward   one pass over the row for its logsumexp (online max and sum), then
//             loss = lse - x[target]; lse is saved, so backward needs no reduction.
//   backward  one pass writing dlogits = (exp(x - lse) - onehot(target)) * dloss.
// Targets are bounds-checked on the device: the first bad row is recorded (atomicMin of its index:
// the same row whatever the schedule), its target beside it, and the host turns them into a
// linea::Error at its next wait for the device (cuda/deferred_checks.h): no synchronization here.
//
// Both passes only stream the logits, so memory bandwidth is their bound. On an H200 (logits of
// 16384 rows x 8192 classes, float32, 537 MB) the first version took 309 us forward and 352 us
// backward, where the bytes moved allow about 134 us and 270 us: each thread read one 4-byte
// element at a time and folded it into the running max and sum (MaxSum::add), a chain through
// exp with a branch on the data, so few loads were in flight. Now each thread reads 16-byte packs
// (float4, double2), kTile of them issued together before any is used; the forward takes a tile's
// max first and then its exps, which do not depend on one another, with one rescale of the
// running sum per tile. A row need not start on 16 bytes: the elements before its first 16-byte
// boundary and those after its last whole pack (fewer than a pack each) are read one by one, so a
// vocabulary of 50257, whose rows start at every offset, takes packs too. The backward stores
// packs where dlogits' row sits against 16 bytes as the logits' row does (contiguous rows from
// aligned storage: always) and falls back to one element at a time otherwise. A row with a NaN
// logit (and a finite one) gets a NaN lse and loss, as on the CPU (MaxSum::logsumexp).
// bfloat16 logits are read as such (8 to a pack) and computed in float32 (C = compute_t<T>): the
// losses, lse and dloss are float32, dlogits bfloat16, each rounded once.
#include <cstdint>

#include "cuda/buffer.h"
#include "cuda/deferred_checks.h"
#include "cuda/kernels/pack.cuh"
#include "cuda/kernels/rows.cuh"

namespace linea::cuda {

namespace {

constexpr unsigned long long kNoBadRow = ~0ull;

// bad[1] = the target of row bad[0], the first bad row, if there is one: the error's message.
__global__ void record_bad_target(unsigned long long* bad, const int64_t* targets, int64_t target_stride) {
  if (bad[0] != kNoBadRow) bad[1] = static_cast<unsigned long long>(targets[bad[0] * target_stride]);
}

// 16 bytes of T, the widest load a thread can issue (cuda/kernels/pack.cuh).
template <class T>
using RowPack = Pack<T, kPack<T>>;

// Packs a thread loads before using any: 64 bytes in flight per thread.
constexpr int kTile = 4;

// A row of n elements as read in packs: `head` elements before its first 16-byte boundary, then
// `packs` whole packs, then the elements from `tail` on (fewer than a pack). A row group has at
// least 32 lanes and a pack at most 4 elements, so each lane has at most one element in the head
// and one in the tail.
struct PackedRow {
  int64_t head, packs, tail;
};

template <class T>
__device__ __forceinline__ PackedRow packed_row(const T* row, int64_t n) {
  constexpr int V = kPack<T>;
  const int misaligned = static_cast<int>(reinterpret_cast<uintptr_t>(row) % 16 / sizeof(T));
  const int64_t head = misaligned == 0 ? 0 : (V - misaligned < n ? V - misaligned : n);
  const int64_t packs = (n - head) / V;
  return {head, packs, head + packs * V};
}

// This lane's tile of packs i, i + kGroup, ..., i + (kTile - 1) kGroup; those past the row's end
// read as `fill`.
template <int kGroup, class T>
__device__ __forceinline__ void load_tile(const RowPack<T>* packs, int64_t count, int64_t i, T fill,
                                          RowPack<T> (&v)[kTile]) {
#pragma unroll
  for (int k = 0; k < kTile; ++k) {
    if (i + k * kGroup < count) {
      v[k] = packs[i + k * kGroup];
    } else {
#pragma unroll
      for (int e = 0; e < kPack<T>; ++e) v[k].v[e] = fill;
    }
  }
}

// Folds a tile into the running (max, sum), in the compute type C: the tile's max first, then exps
// that are independent of one another, and one rescale of the sum. A NaN never wins the max, so it
// reaches the sum and makes it NaN, as in MaxSum::add. Where the max is not finite (everything
// -inf so far, or a +inf logit) the elements go through MaxSum::add one by one, so such rows come
// out as before.
template <class T, class C>
__device__ __forceinline__ void add_tile(MaxSum<C>& part, const RowPack<T> (&v)[kTile]) {
  constexpr C kInf = std::numeric_limits<C>::infinity();
  C m = part.max;
#pragma unroll
  for (int k = 0; k < kTile; ++k)
#pragma unroll
    for (int e = 0; e < kPack<T>; ++e) m = static_cast<C>(v[k].v[e]) > m ? static_cast<C>(v[k].v[e]) : m;
  if (m > -kInf && m < kInf) {
    C sums[kTile];  // one per pack: shorter chains of additions
#pragma unroll
    for (int k = 0; k < kTile; ++k) {
      sums[k] = 0;
#pragma unroll
      for (int e = 0; e < kPack<T>; ++e) sums[k] += exp(static_cast<C>(v[k].v[e]) - m);  // exp(-inf) = 0
    }
    C tile = 0;
#pragma unroll
    for (int k = 0; k < kTile; ++k) tile += sums[k];
    part.sum = part.sum * exp(part.max - m) + tile;
    part.max = m;
  } else {
#pragma unroll
    for (int k = 0; k < kTile; ++k)
#pragma unroll
      for (int e = 0; e < kPack<T>; ++e) part.add(static_cast<C>(v[k].v[e]));
  }
}

template <class T, int kGroup, class C = compute_t<T>>
__global__ void __launch_bounds__(RowGroup<kGroup>::kBlockThreads)
    cross_entropy_kernel(const T* logits, int64_t row_stride, const int64_t* targets, int64_t target_stride,
                         int64_t ignore_index, C* losses, C* lse, int64_t rows, int64_t classes,
                         unsigned long long* bad_row) {
  using G = RowGroup<kGroup>;
  constexpr C kNegInf = -std::numeric_limits<C>::infinity();
  const int lane = G::lane();
  for (int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const T* x = logits + r * row_stride;
    const int64_t t = lane == 0 ? targets[r * target_stride] : 0;  // loaded now, used after the row
    const PackedRow row = packed_row(x, classes);
    C loose[2] = {kNegInf, kNegInf};  // this lane's elements outside the packs; -inf adds nothing
    if (lane < row.head) loose[0] = static_cast<C>(x[lane]);
    if (const int64_t j = row.tail + lane; j < classes) loose[1] = static_cast<C>(x[j]);
    MaxSum<C> part;
    const RowPack<T>* packs = reinterpret_cast<const RowPack<T>*>(x + row.head);
    for (int64_t i = lane; i < row.packs; i += kTile * kGroup) {
      RowPack<T> v[kTile];
      load_tile<kGroup>(packs, row.packs, i, static_cast<T>(kNegInf), v);
      add_tile(part, v);
    }
    part.add(loose[0]);
    part.add(loose[1]);
    const C l = G::max_sum(part).logsumexp();
    if (lane == 0) {
      lse[r] = l;
      if (t == ignore_index) {
        losses[r] = C(0);
      } else if (t < 0 || t >= classes) {
        losses[r] = std::numeric_limits<C>::quiet_NaN();
        atomicMin(bad_row, static_cast<unsigned long long>(r));
      } else {
        losses[r] = l - static_cast<C>(x[t]);
      }
    }
  }
}

// forward was loss = lse - x[target], so dx = (softmax(x) - onehot(target)) * dloss, computed in
// C and rounded once into T.
template <class T, int kGroup, class C = compute_t<T>>
__global__ void __launch_bounds__(RowGroup<kGroup>::kBlockThreads)
    cross_entropy_backward_kernel(const T* logits, int64_t row_stride, const int64_t* targets, int64_t target_stride,
                                  int64_t ignore_index, const C* lse, int64_t lse_stride, const C* dloss,
                                  int64_t dloss_stride, T* dlogits, int64_t rows, int64_t classes) {
  using G = RowGroup<kGroup>;
  constexpr int V = kPack<T>;
  const int lane = G::lane();
  for (int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const T* x = logits + r * row_stride;
    T* dx = dlogits + r * classes;
    const int64_t t = targets[r * target_stride];
    const PackedRow out = packed_row(dx, classes);
    RowPack<T>* out_packs = reinterpret_cast<RowPack<T>*>(dx + out.head);
    if (t == ignore_index) {
      if (lane < out.head) dx[lane] = T(0);
      if (const int64_t j = out.tail + lane; j < classes) dx[j] = T(0);
      for (int64_t i = lane; i < out.packs; i += kGroup) out_packs[i] = RowPack<T>{};
      continue;
    }
    const C g = dloss[r * dloss_stride], l = lse[r * lse_stride];
    auto grad = [&](T xj, bool is_target) {
      const C p = exp(static_cast<C>(xj) - l) * g;
      return static_cast<T>(is_target ? p - g : p);
    };
    if (packed_row(x, classes).head != out.head) {  // no common 16-byte boundaries: one at a time
      for (int64_t j = lane; j < classes; j += kGroup) dx[j] = grad(x[j], j == t);
      continue;
    }
    if (lane < out.head) dx[lane] = grad(x[lane], lane == t);
    if (const int64_t j = out.tail + lane; j < classes) dx[j] = grad(x[j], j == t);
    const RowPack<T>* in_packs = reinterpret_cast<const RowPack<T>*>(x + out.head);
    for (int64_t i = lane; i < out.packs; i += kTile * kGroup) {
      RowPack<T> v[kTile];
      load_tile<kGroup>(in_packs, out.packs, i, T(0), v);
#pragma unroll
      for (int k = 0; k < kTile; ++k) {
        const int64_t at = i + k * kGroup;
        if (at >= out.packs) break;
        const int64_t target_in_pack = t - (out.head + at * V);  // in [0, V) for the pack holding it
#pragma unroll
        for (int e = 0; e < V; ++e) v[k].v[e] = grad(v[k].v[e], e == target_in_pack);
        out_packs[at] = v[k];
      }
    }
  }
}

// logits with unit stride along classes (any row stride) are read in place; others are copied.
Tensor rows_readable(const Tensor& logits) {
  return logits.size(1) == 1 || logits.stride(1) == 1 ? logits : contiguous_copy(logits);
}

}  // namespace

void CudaBackend::cross_entropy(const Tensor& logits_, const Tensor& targets, int64_t ignore_index,
                                const Tensor& losses, const Tensor& lse) const {
  check_on_device(device_, "cross_entropy", {&logits_, &targets, &losses, &lse});
  const int64_t rows = logits_.size(0), classes = logits_.size(1);
  if (rows == 0) return;
  const cudaStream_t stream = use_device(device_);
  const Tensor logits = rows_readable(logits_);
  DeviceBuffer bad(2 * sizeof(unsigned long long), device_);  // the first bad row, its target
  LINEA_CUDA_CHECK(cudaMemsetAsync(bad.as<void>(), 0xff, 2 * sizeof(unsigned long long), stream), "cross_entropy");
  dispatch_floating_or_bf16(logits.dtype(), "cross_entropy", [&]<class T>() {
    using C = compute_t<T>;
    with_row_group(classes, rows, [&]<int kGroup>() {
      cross_entropy_kernel<T, kGroup><<<row_blocks<kGroup>(rows, device_), RowGroup<kGroup>::kBlockThreads, 0, stream>>>(
          logits.data<T>(), logits.stride(0), targets.data<int64_t>(), targets.stride(0), ignore_index,
          losses.data<C>(), lse.data<C>(), rows, classes, bad.as<unsigned long long>());
    });
    LINEA_CUDA_LAUNCH_CHECK("cross_entropy", "logits ", logits.describe());
  });
  record_bad_target<<<1, 1, 0, stream>>>(bad.as<unsigned long long>(), targets.data<int64_t>(), targets.stride(0));
  LINEA_CUDA_LAUNCH_CHECK("cross_entropy", "targets ", targets.describe());
  defer_check(device_, bad.as<int64_t>(), 2, "cross_entropy", [classes](const int64_t* v) -> std::string {
    if (static_cast<unsigned long long>(v[0]) == kNoBadRow) return "";
    return check_message("target ", v[1], " at row ", v[0], " is out of range for ", classes, " classes");
  });
}

void CudaBackend::cross_entropy_backward(const Tensor& logits_, const Tensor& targets, int64_t ignore_index,
                                         const Tensor& lse, const Tensor& dloss, const Tensor& dlogits) const {
  check_on_device(device_, "cross_entropy_backward", {&logits_, &targets, &lse, &dloss, &dlogits});
  const int64_t rows = logits_.size(0), classes = logits_.size(1);
  if (rows == 0) return;
  const cudaStream_t stream = use_device(device_);
  const Tensor logits = rows_readable(logits_);
  dispatch_floating_or_bf16(logits.dtype(), "cross_entropy_backward", [&]<class T>() {
    using C = compute_t<T>;
    with_row_group(classes, rows, [&]<int kGroup>() {
      cross_entropy_backward_kernel<T, kGroup><<<row_blocks<kGroup>(rows, device_), RowGroup<kGroup>::kBlockThreads,
                                                 0, stream>>>(
          logits.data<T>(), logits.stride(0), targets.data<int64_t>(), targets.stride(0), ignore_index,
          lse.data<C>(), lse.stride(0), dloss.data<C>(), dloss.stride(0), dlogits.data<T>(), rows, classes);
    });
    LINEA_CUDA_LAUNCH_CHECK("cross_entropy_backward", "logits ", logits.describe());
  });
}

}  // namespace linea::cuda
