#pragma once
// Making tensors: constant fills, ranges, random draws and conversion from std::vector. The
// results are leaves; call .requires_grad_() on one to make it a parameter of a computation.
#include <initializer_list>
#include <vector>

#include "tensor/random.h"
#include "tensor/tensor.h"

namespace linea {

struct TensorOptions {
  DType dtype = kFloat32;
  Device device = kCPU;
  TensorOptions() = default;
  TensorOptions(DType d) : dtype(d) {}  // NOLINT: zeros({2}, kFloat64) reads well
  TensorOptions(Device dev) : device(dev) {}  // NOLINT
  TensorOptions(DType d, Device dev) : dtype(d), device(dev) {}
};

Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});
Tensor full(const Shape& shape, double value, TensorOptions opts = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
// A 0-dim tensor holding value.
Tensor scalar_tensor(double value, TensorOptions opts = {});

// [start, end) in steps of step; the dtype defaults to Int64 as in PyTorch.
Tensor arange(double start, double end, double step = 1.0, TensorOptions opts = kInt64);
Tensor arange(int64_t end, TensorOptions opts = kInt64);

// Uniform in [low, high), standard normal, integers in [low, high); gen defaults to
// default_generator().
Tensor rand(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor uniform(const Shape& shape, double low, double high, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randn(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, Device device = kCPU, Generator* gen = nullptr);

// From host values in row-major order; shape defaults to 1-D.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape = {}, Device device = kCPU);
// tensor({1.0, 2.0}, {2}) makes a float32 tensor; pass a dtype to choose another.
Tensor tensor(std::initializer_list<double> values, const Shape& shape = {}, TensorOptions opts = {});

// Lower/upper triangular boolean masks of a (rows, cols) matrix: tril_mask(r, c, k)[i][j] is
// j <= i + k (k = 0: the causal mask); triu_mask(r, c, k)[i][j] is j >= i + k.
Tensor tril_mask(int64_t rows, int64_t cols, int64_t k = 0, Device device = kCPU);
Tensor triu_mask(int64_t rows, int64_t cols, int64_t k = 0, Device device = kCPU);

}  // namespace linea
