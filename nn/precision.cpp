#include "nn/precision.h"

#include "autograd/ops.h"
#include "nn/names.h"

namespace linea::nn {

namespace {

thread_local Precision t_precision = Precision::Float32;

const names::Table<Precision> kPrecisionNames[] = {{Precision::Float32, "fp32"}, {Precision::BFloat16, "bf16"}};

}  // namespace

std::string precision_name(Precision precision) { return names::name_in(kPrecisionNames, precision); }
Precision parse_precision(const std::string& name, const char* op) {
  return names::parse_in(kPrecisionNames, name, op, "precision");
}

Precision product_precision() { return t_precision; }
void set_product_precision(Precision precision) { t_precision = precision; }

Tensor linear_product(const Tensor& x, const Tensor& weight) { return linear_product(x, weight, x.dtype()); }

Tensor linear_product(const Tensor& x, const Tensor& weight, DType out) {
  if (t_precision == Precision::Float32 || (x.dtype() != kFloat32 && x.dtype() != kBFloat16)) {
    LINEA_CHECK(out == x.dtype(), "linear_product", "writes x's dtype outside bfloat16 precision, asked for ",
                dtype_name(out), " from ", x.describe());
    return matmul(x, t(weight));
  }
  return matmul_bf16(x, t(weight), out);
}

DType activation_dtype(const Tensor& x) {
  return t_precision == Precision::BFloat16 && x.dtype() == kFloat32 ? kBFloat16 : x.dtype();
}

DType stream_dtype(const Tensor& x) {
  return t_precision == Precision::BFloat16 && x.dtype() == kBFloat16 ? kFloat32 : x.dtype();
}

}  // namespace linea::nn
