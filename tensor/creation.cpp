#include "tensor/creation.h"

#include <cmath>

#include "tensor/backend.h"
#include "tensor/transfer.h"

namespace linea {

Tensor full(const Shape& shape, double value, TensorOptions opts) {
  Tensor t = empty(shape, opts.dtype, opts.device);
  backend_for(t).fill(t, value);
  return t;
}
Tensor zeros(const Shape& shape, TensorOptions opts) { return full(shape, 0.0, opts); }
Tensor ones(const Shape& shape, TensorOptions opts) { return full(shape, 1.0, opts); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.dtype(), t.device()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), {t.dtype(), t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), {t.dtype(), t.device()}); }
Tensor full_like(const Tensor& t, double value) { return full(t.shape(), value, {t.dtype(), t.device()}); }
Tensor scalar_tensor(double value, TensorOptions opts) { return full({}, value, opts); }

Tensor arange(double start, double end, double step, TensorOptions opts) {
  LINEA_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step), "arange",
              "needs finite start/end and a non-zero step, got ", start, ", ", end, ", ", step);
  const double count = std::ceil((end - start) / step);
  Tensor t = empty({std::max<int64_t>(0, static_cast<int64_t>(count))}, opts.dtype, opts.device);
  backend_for(t).arange(t, start, step);
  return t;
}
Tensor arange(int64_t end, TensorOptions opts) { return arange(0.0, static_cast<double>(end), 1.0, opts); }

namespace {
Generator& pick(Generator* gen) { return gen ? *gen : default_generator(); }
}  // namespace

Tensor uniform(const Shape& shape, double low, double high, TensorOptions opts, Generator* gen) {
  LINEA_CHECK(is_floating(opts.dtype), "uniform", "needs a floating dtype, got ", dtype_name(opts.dtype));
  LINEA_CHECK(low <= high, "uniform", "low ", low, " is above high ", high);
  Tensor t = empty(shape, opts.dtype, opts.device);
  const Generator::Draw draw = pick(gen).reserve(t.numel());
  backend_for(t).uniform(t, draw.seed, draw.offset, low, high);
  return t;
}

Tensor rand(const Shape& shape, TensorOptions opts, Generator* gen) { return uniform(shape, 0.0, 1.0, opts, gen); }

Tensor randn(const Shape& shape, TensorOptions opts, Generator* gen) {
  LINEA_CHECK(is_floating(opts.dtype), "randn", "needs a floating dtype, got ", dtype_name(opts.dtype));
  Tensor t = empty(shape, opts.dtype, opts.device);
  const Generator::Draw draw = pick(gen).reserve(t.numel());
  backend_for(t).normal(t, draw.seed, draw.offset, 0.0, 1.0);
  return t;
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Device device, Generator* gen) {
  LINEA_CHECK(low < high, "randint", "empty range [", low, ", ", high, ")");
  const Tensor u = uniform(shape, 0.0, 1.0, kFloat64, gen);
  Tensor out = empty(shape, kInt64, kCPU);
  const double* src = u.data<double>();
  int64_t* dst = out.data<int64_t>();
  const double span = static_cast<double>(high - low);
  for (int64_t i = 0; i < out.numel(); ++i)
    dst[i] = std::min(high - 1, low + static_cast<int64_t>(std::floor(src[i] * span)));
  return device.is_cpu() ? out : copy_to(out, device);
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape_in, Device device) {
  const Shape shape = shape_in.empty() && values.size() != 1 ? Shape{static_cast<int64_t>(values.size())} : shape_in;
  LINEA_CHECK(numel_of(shape) == static_cast<int64_t>(values.size()), "from_vector", values.size(),
              " values do not fill shape ", shape_str(shape));
  Tensor host = empty(shape, dtype_of<T>::value, kCPU);
  T* dst = host.data<T>();
  for (size_t i = 0; i < values.size(); ++i) dst[i] = values[i];
  return device.is_cpu() ? host : copy_to(host, device);
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, Device);
template Tensor from_vector<bool>(const std::vector<bool>&, const Shape&, Device);

Tensor tensor(std::initializer_list<double> values, const Shape& shape, TensorOptions opts) {
  const Tensor t = from_vector(std::vector<double>(values), shape, kCPU);
  if (opts.dtype == kFloat64 && opts.device.is_cpu()) return t;
  Tensor out = empty(t.shape(), opts.dtype, opts.device);
  copy_into(out, t);
  return out;
}

namespace {
Tensor triangle_mask(int64_t rows, int64_t cols, int64_t k, bool lower, Device device) {
  LINEA_CHECK(rows >= 0 && cols >= 0, lower ? "tril_mask" : "triu_mask", "negative size ", rows, "x", cols);
  Tensor host = empty({rows, cols}, kBool, kCPU);
  bool* m = host.data<bool>();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[i * cols + j] = lower ? j <= i + k : j >= i + k;
  return device.is_cpu() ? host : copy_to(host, device);
}
}  // namespace

Tensor tril_mask(int64_t rows, int64_t cols, int64_t k, Device device) { return triangle_mask(rows, cols, k, true, device); }
Tensor triu_mask(int64_t rows, int64_t cols, int64_t k, Device device) { return triangle_mask(rows, cols, k, false, device); }

}  // namespace linea
