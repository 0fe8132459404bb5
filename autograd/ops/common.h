#pragma once
// Helpers shared by the op files: input checks that name the op, and the forward kernels'
// allocate-then-launch steps.
#include "autograd/node.h"
#include "autograd/ops.h"
#include "tensor/backend.h"
#include "tensor/transfer.h"

namespace linea::ops_detail {

using autograd::Grads;
using autograd::record;
using autograd::record_adding;
using autograd::record_outputs;
using autograd::SavedTensor;

void check_defined(const Tensor& x, const char* op);
void check_floating(const Tensor& x, const char* op);
// Same device and dtype (both floating unless allow_any), else an Error naming both tensors.
void check_compatible(const Tensor& a, const Tensor& b, const char* op, bool allow_any = false);
void check_index_tensor(const Tensor& index, const Tensor& x, const char* op);
// dim normalized for an op that works along one existing dim of x; a 0-dim tensor has none.
int64_t dim_along(const Tensor& x, int64_t dim, const char* op);

// Runs f(); an Error thrown inside it (by an allocator or a kernel, which cannot know what the
// user called) is rethrown as op's, with context in front.
template <class F>
auto rethrow_as(const char* op, const std::string& context, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    fail(op, context, ": ", e.what());
  }
}

// out = op(x) elementwise, freshly allocated.
Tensor unary_kernel(UnaryOp op, const Tensor& x, UnaryArgs args = {});
// out = op(a, b) with broadcasting; comparisons give Bool.
Tensor binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const char* name);
// An uninitialised, dense tensor of `shape` whose dims lie in memory in the order of a tensor with
// `strides` (leading dims by decreasing stride, the last dim innermost), when those strides keep
// the last dim contiguous (the kernels that use this write contiguous rows); else contiguous. An
// op on a transposed view then returns (and takes gradients in) the view's memory order, and the
// reshapes around it stay views rather than copies: attention and RoPE on the (B, T, H, dh)
// projections seen as (B, H, T, dh), also when those are parts of one wider product (rows with
// gaps between them).
Tensor empty_in_order_of(const Shape& shape, const Shape& strides, DType dtype, Device device);
// The same layout as a view of `flat`, a contiguous 1-D tensor of numel(shape) elements (a slice
// of a larger result, for an op that returns several tensors from one node).
Tensor in_order_of(const Tensor& flat, const Shape& shape, const Shape& strides);
inline Tensor empty_like_order(const Tensor& x) { return empty_in_order_of(x.shape(), x.strides(), x.dtype(), x.device()); }
// The memory of a gradient home (autograd/node.h: GradientHome) the op took at forward time, when
// it is there to claim and its rows (last dim) are contiguous, as the kernels that write any view
// need; undefined otherwise.
inline Tensor claim_rows(const std::shared_ptr<autograd::GradientHome>& home) {
  const Tensor memory = autograd::claim(home);
  const bool rows = memory.defined() && (memory.dim() == 0 || memory.size(-1) == 1 || memory.strides().back() == 1);
  return rows ? memory : Tensor();
}
// Memory for the gradient of an op's input x: its home's (claim_rows: the gradient is then written
// where it ends up, rather than copied there), else empty_like_order(x).
inline Tensor gradient_buffer(const std::shared_ptr<autograd::GradientHome>& home, const Tensor& x) {
  const Tensor memory = claim_rows(home);
  return memory.defined() ? memory : empty_like_order(x);
}

// x itself when its rows (last dim) are contiguous, which the row kernels need, else a contiguous
// copy, cut from the graph (the op records x itself).
Tensor contiguous_rows(const Tensor& x);

// A 0-dim tensor holding value, in x's dtype and on x's device.
Tensor scalar_like(double value, const Tensor& x);

// A kernel's float parameter (a norm's weight, RoPE's tables) in the dtype the kernel computes in
// for x: p widened through the differentiable cast when it is bfloat16 and x computes in float32
// (compute_dtype); p itself otherwise, for the caller's checks.
inline Tensor in_compute_dtype(const Tensor& p, const Tensor& x) {
  const DType want = compute_dtype(x.dtype());
  return p.defined() && p.dtype() == kBFloat16 && want != kBFloat16 ? to(p, want) : p;
}

}  // namespace linea::ops_detail
