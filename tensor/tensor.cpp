#include "tensor/tensor.h"

#include <limits>
#include <ostream>

#include "tensor/backend.h"
#include "tensor/transfer.h"

namespace linea {

TensorImpl& Tensor::state() const {
  LINEA_CHECK(impl_ != nullptr, "tensor", "use of an undefined tensor (a default-constructed Tensor, "
              "or a gradient that was never computed)");
  return *impl_;
}

// normalize_dim lets dim 0 through for a 0-dim tensor (reductions want that); here it would
// read past the end of an empty shape.
int64_t Tensor::size(int64_t d) const {
  LINEA_CHECK(dim() > 0, "size", "a 0-dim tensor has no dim ", d, ": ", describe());
  return shape()[normalize_dim(d, dim(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  LINEA_CHECK(dim() > 0, "stride", "a 0-dim tensor has no dim ", d, ": ", describe());
  return strides()[normalize_dim(d, dim(), "stride")];
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t d = dim(); d-- > 0;) {
    if (shape()[d] == 1) continue;
    if (strides()[d] != expected) return false;
    expected *= shape()[d];
  }
  return true;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  return std::string(dtype_name(dtype())) + shape_str(shape()) + " on " + device().str();
}

void* Tensor::raw_data() const {
  return static_cast<char*>(storage()->data()) + offset() * static_cast<int64_t>(dtype_size(dtype()));
}

template <class T>
T* Tensor::data() const {
  LINEA_CHECK(dtype() == dtype_of<T>::value, "data", "tensor is ", dtype_name(dtype()),
              ", asked for ", dtype_name(dtype_of<T>::value));
  return static_cast<T*>(raw_data());
}
template float* Tensor::data<float>() const;
template double* Tensor::data<double>() const;
template int64_t* Tensor::data<int64_t>() const;
template bool* Tensor::data<bool>() const;
template bfloat16* Tensor::data<bfloat16>() const;

template <class T>
std::vector<T> Tensor::to_vector() const {
  const Tensor host = copy_to(*this, kCPU);
  std::vector<T> out(host.numel());
  dispatch_all(host.dtype(), [&]<class S>() {
    const S* src = host.data<S>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<T>(src[i]);
  });
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;

double Tensor::item() const {
  LINEA_CHECK(numel() == 1, "item", "item() needs a tensor with one element, got ", describe());
  return to_vector<double>()[0];
}

AutogradMeta& Tensor::autograd_meta() const {
  TensorImpl& i = state();
  if (!i.autograd) i.autograd = std::make_shared<AutogradMeta>();
  return *i.autograd;
}

bool Tensor::requires_grad() const { return state().autograd && state().autograd->requires_grad; }

Tensor& Tensor::requires_grad_(bool on) {
  LINEA_CHECK(is_floating(dtype()) || !on, "requires_grad_",
              "only floating tensors can require gradients, got ", describe());
  LINEA_CHECK(is_leaf(), "requires_grad_",
              "can only be set on leaf tensors (made by you, not by an op); use detach() first");
  autograd_meta().requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return state().autograd ? state().autograd->grad : Tensor(); }

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined())
    LINEA_CHECK(grad.shape() == shape() && grad.dtype() == dtype() && grad.device() == device(),
                "set_grad", "gradient ", grad.describe(), " does not match tensor ", describe());
  autograd_meta().grad = grad;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  return state().autograd ? state().autograd->grad_fn : none;
}

Tensor& Tensor::set_name(const std::string& name) {
  autograd_meta().name = name;
  return *this;
}

std::string Tensor::name() const { return state().autograd ? state().autograd->name : std::string(); }

Tensor empty(const Shape& shape, DType dtype, Device device) {
  check_shape(shape, "empty");
  // The byte count is unsigned: an overflow would wrap to a small allocation, not fail.
  LINEA_CHECK(numel_of(shape) <= std::numeric_limits<int64_t>::max() / static_cast<int64_t>(dtype_size(dtype)),
              "empty", "shape ", shape_str(shape), " of ", dtype_name(dtype), " needs more bytes than memory can address");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(numel_of(shape) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset) {
  check_shape(shape, "view");
  LINEA_CHECK(shape.size() == strides.size(), "view", "shape ", shape_str(shape), " and strides ",
              shape_str(strides), " differ in length");
  // The view must stay inside the storage: check its lowest and highest element.
  int64_t lowest = offset, highest = offset;
  if (numel_of(shape) > 0) {
    for (size_t d = 0; d < shape.size(); ++d) {
      const int64_t reach = (shape[d] - 1) * strides[d];
      (reach < 0 ? lowest : highest) += reach;
    }
    const int64_t capacity = static_cast<int64_t>(base.storage()->nbytes() / dtype_size(base.dtype()));
    LINEA_CHECK(lowest >= 0 && highest < capacity, "view", "shape ", shape_str(shape), " with strides ",
                shape_str(strides), " and offset ", offset, " reaches outside a storage of ", capacity,
                " elements");
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace linea
