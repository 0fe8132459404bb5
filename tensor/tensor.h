#pragma once
// Tensor: a cheap handle (a shared pointer) to a view of shared storage.
//
//   storage   the memory, shared by every view of it (tensor/storage.h)
//   shape     sizes of each dim
//   strides   elements to step in storage per step along each dim (0 = broadcast)
//   offset    index of element [0,0,...] in storage, in elements
//   dtype     element type; the device lives in the storage
//   autograd  requires_grad, .grad and the node that produced it (see autograd/)
//
// Copying a Tensor copies the handle, not the data: a = b makes a and b the same tensor. Ops are
// free functions (autograd/ops.h); this class only describes and accesses a tensor.
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace linea {

namespace autograd {
class Node;
class GradientHome;
}
struct AutogradMeta;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0;
  DType dtype = DType::Float32;
  std::shared_ptr<AutogradMeta> autograd;  // null until the tensor takes part in autograd
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl_ptr() const { return impl_.get(); }
  // True when both handles refer to the same tensor (not merely equal values).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  // True when this handle is the only way to reach the tensor and its memory: no other handle
  // shares the tensor, and no other tensor (a view) shares its storage. Its owner may then keep
  // the memory as its own (autograd's AccumulateGrad keeps such a gradient rather than copy it).
  bool is_sole_owner() const { return impl_.use_count() == 1 && state().storage.use_count() == 1; }

  // Description.
  const Shape& shape() const { return state().shape; }
  int64_t dim() const { return static_cast<int64_t>(state().shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  const Shape& strides() const { return state().strides; }
  int64_t stride(int64_t d) const;
  int64_t offset() const { return state().offset; }
  int64_t numel() const { return numel_of(state().shape); }
  DType dtype() const { return state().dtype; }
  Device device() const { return state().storage->device(); }
  const std::shared_ptr<Storage>& storage() const { return state().storage; }
  bool is_contiguous() const;
  std::string describe() const;  // "float32[2, 3] on cpu", for error messages

  // Access. data<T>() points at element [0,...,0] (offset applied); the dtype must match T.
  void* raw_data() const;
  template <class T> T* data() const;
  // The single value of a one-element tensor, as double (copied from the device if needed).
  double item() const;
  // All values in row-major order (copied to the host and converted to T).
  template <class T> std::vector<T> to_vector() const;
  std::string str() const;  // readable printing, as operator<< prints

  // In-place writes go through here so that autograd can detect them (see storage.h).
  uint64_t version() const { return state().storage->version(); }
  void bump_version() const { state().storage->bump_version(); }

  // Autograd state. requires_grad_ is only for leaves (tensors made by the user, not by ops).
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  bool is_leaf() const { return grad_fn() == nullptr; }
  // A name shown in Graphviz exports of the graph (autograd/dot.h).
  Tensor& set_name(const std::string& name);
  std::string name() const;
  AutogradMeta& autograd_meta() const;  // created on first use

 private:
  TensorImpl& state() const;  // the impl, or an Error when undefined
  std::shared_ptr<TensorImpl> impl_;
};

// Autograd's per-tensor state. It is plain data; autograd/ gives it meaning.
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;          // set on tensors produced by recorded ops
  int output_nr = 0;                                // which of grad_fn's outputs this tensor is
  std::weak_ptr<autograd::Node> grad_accumulator;  // a leaf's AccumulateGrad, shared by its uses
  // Where this tensor's gradient may be written directly (autograd/node.h: GradientHome); null:
  // nowhere in particular.
  std::shared_ptr<autograd::GradientHome> gradient_home;
  std::string name;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// t.data<T>(), or nullptr for an undefined tensor: a kernel's optional input or output (a norm
// without weight, a scan without initial state).
template <class T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Makes a fresh contiguous tensor of uninitialised memory.
Tensor empty(const Shape& shape, DType dtype = kFloat32, Device device = kCPU);
// A tensor over existing storage (a view); shape, strides and offset are checked against storage.
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset);

}  // namespace linea
