// Cross-entropy fused with the softmax of its logits, against the CPU oracle
// (cpu/softmax.cpp). logits (N, C), one row group per row (rows.cuh; a block of 1024
// threads for a vocabulary of 50257):
//   forward   one pass over the row for its logsumexp (online max and sum), then
//             loss = lse - x[target]; lse is saved, so backward needs no reduction.
//   backward  one pass writing dlogits = (exp(x - lse) - onehot(target)) * dloss.
// Targets are bounds-checked on the device: the first bad row is recorded (atomicMin of its index:
// the same row whatever the schedule) and the host turns it into a linea::Error after the kernel,
// at the cost of one synchronization per forward.
#include "cuda/buffer.h"
#include "cuda/kernels/rows.cuh"

namespace linea::cuda {

namespace {

constexpr unsigned long long kNoBadRow = ~0ull;

template <class T, int kGroup>
__global__ void __launch_bounds__(RowGroup<kGroup>::kBlockThreads)
    cross_entropy_kernel(const T* logits, int64_t row_stride, const int64_t* targets, int64_t target_stride,
                         int64_t ignore_index, T* losses, T* lse, int64_t rows, int64_t classes,
                         unsigned long long* bad_row) {
  using G = RowGroup<kGroup>;
  for (int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const T* x = logits + r * row_stride;
    MaxSum<T> part;
    for (int64_t j = G::lane(); j < classes; j += kGroup) part.add(x[j]);
    const T l = G::max_sum(part).logsumexp();
    if (G::lane() == 0) {
      const int64_t t = targets[r * target_stride];
      lse[r] = l;
      if (t == ignore_index) {
        losses[r] = T(0);
      } else if (t < 0 || t >= classes) {
        losses[r] = std::numeric_limits<T>::quiet_NaN();
        atomicMin(bad_row, static_cast<unsigned long long>(r));
      } else {
        losses[r] = l - x[t];
      }
    }
  }
}

// forward was loss = lse - x[target], so dx = (softmax(x) - onehot(target)) * dloss.
template <class T, int kGroup>
__global__ void __launch_bounds__(RowGroup<kGroup>::kBlockThreads)
    cross_entropy_backward_kernel(const T* logits, int64_t row_stride, const int64_t* targets, int64_t target_stride,
                                  int64_t ignore_index, const T* lse, int64_t lse_stride, const T* dloss,
                                  int64_t dloss_stride, T* dlogits, int64_t rows, int64_t classes) {
  using G = RowGroup<kGroup>;
  for (int64_t r = G::first_row(); r < rows; r += G::row_step()) {
    const T* x = logits + r * row_stride;
    T* dx = dlogits + r * classes;
    const int64_t t = targets[r * target_stride];
    if (t == ignore_index) {
      for (int64_t j = G::lane(); j < classes; j += kGroup) dx[j] = T(0);
      continue;
    }
    const T g = dloss[r * dloss_stride], l = lse[r * lse_stride];
    for (int64_t j = G::lane(); j < classes; j += kGroup) {
      const T p = exp(x[j] - l) * g;
      dx[j] = j == t ? p - g : p;
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
  DeviceBuffer bad_row(sizeof(unsigned long long), device_);
  LINEA_CUDA_CHECK(cudaMemsetAsync(bad_row.as<void>(), 0xff, sizeof(unsigned long long), stream), "cross_entropy");
  dispatch_floating(logits.dtype(), "cross_entropy", [&]<class T>() {
    with_row_group(classes, rows, [&]<int kGroup>() {
      cross_entropy_kernel<T, kGroup><<<row_blocks<kGroup>(rows, device_), RowGroup<kGroup>::kBlockThreads, 0, stream>>>(
          logits.data<T>(), logits.stride(0), targets.data<int64_t>(), targets.stride(0), ignore_index,
          losses.data<T>(), lse.data<T>(), rows, classes, bad_row.as<unsigned long long>());
    });
    LINEA_CUDA_LAUNCH_CHECK("cross_entropy", "logits ", logits.describe());
  });
  unsigned long long first_bad = kNoBadRow;
  copy_to_host(&first_bad, bad_row.as<void>(), sizeof(first_bad), device_);
  if (first_bad != kNoBadRow) {
    const int64_t row = static_cast<int64_t>(first_bad);
    int64_t target = 0;
    copy_to_host(&target, targets.data<int64_t>() + row * targets.stride(0), sizeof(target), device_);
    fail("cross_entropy", "target ", target, " at row ", row, " is out of range for ", classes, " classes");
  }
}

void CudaBackend::cross_entropy_backward(const Tensor& logits_, const Tensor& targets, int64_t ignore_index,
                                         const Tensor& lse, const Tensor& dloss, const Tensor& dlogits) const {
  check_on_device(device_, "cross_entropy_backward", {&logits_, &targets, &lse, &dloss, &dlogits});
  const int64_t rows = logits_.size(0), classes = logits_.size(1);
  if (rows == 0) return;
  const cudaStream_t stream = use_device(device_);
  const Tensor logits = rows_readable(logits_);
  dispatch_floating(logits.dtype(), "cross_entropy_backward", [&]<class T>() {
    with_row_group(classes, rows, [&]<int kGroup>() {
      cross_entropy_backward_kernel<T, kGroup><<<row_blocks<kGroup>(rows, device_), RowGroup<kGroup>::kBlockThreads,
                                                 0, stream>>>(
          logits.data<T>(), logits.stride(0), targets.data<int64_t>(), targets.stride(0), ignore_index,
          lse.data<T>(), lse.stride(0), dloss.data<T>(), dloss.stride(0), dlogits.data<T>(), rows, classes);
    });
    LINEA_CUDA_LAUNCH_CHECK("cross_entropy_backward", "logits ", logits.describe());
  });
}

}  // namespace linea::cuda
