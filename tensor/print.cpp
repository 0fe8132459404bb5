// Readable printing, in the style of NumPy and PyTorch: nested brackets, aligned columns, and
// "..." in place of the middle of long dims.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tensor/tensor.h"

namespace linea {

namespace {

constexpr int64_t kEdgeItems = 3;     // shown at each end of a long dim
constexpr int64_t kSummarizeAbove = 1000;  // elements

std::string format_value(double v, DType dtype, bool scientific) {
  char buf[48];
  if (dtype == DType::Bool) return v != 0 ? "true" : "false";
  if (dtype == DType::Int64) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else if (std::isnan(v)) return "nan";
  else if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  else std::snprintf(buf, sizeof buf, scientific ? "%.4e" : "%.4f", v);
  return buf;
}

struct Printer {
  const std::vector<double>& values;
  const Shape& shape;
  DType dtype;
  bool summarize, scientific;
  size_t width;

  // Prints the sub-tensor at flat offset `base` whose first dim is `d`.
  void print(std::ostringstream& os, size_t d, int64_t base, const Shape& strides) const {
    if (d == shape.size()) {
      const std::string s = format_value(values[base], dtype, scientific);
      os << std::string(width > s.size() ? width - s.size() : 0, ' ') << s;
      return;
    }
    os << "[";
    const int64_t n = shape[d];
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        os << (d + 1 == shape.size() ? "..., " : "...,\n" + std::string(d + 8, ' '));
        i = n - kEdgeItems - 1;
        continue;
      }
      print(os, d + 1, base + i * strides[d], strides);
      if (i + 1 < n) os << (d + 1 == shape.size() ? ", " : ",\n" + std::string(d + 8, ' '));
    }
    os << "]";
  }
};

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::vector<double> values = to_vector<double>();
  double largest = 0, smallest_nonzero = INFINITY;
  for (double v : values)
    if (std::isfinite(v) && v != 0) {
      largest = std::max(largest, std::abs(v));
      smallest_nonzero = std::min(smallest_nonzero, std::abs(v));
    }
  const bool scientific = is_floating(dtype()) && (largest >= 1e8 || smallest_nonzero < 1e-4);
  size_t width = 1;
  for (double v : values) width = std::max(width, format_value(v, dtype(), scientific).size());
  Printer p{values, shape(), dtype(), numel() > kSummarizeAbove, scientific, width};
  std::ostringstream os;
  os << "tensor(";
  p.print(os, 0, 0, contiguous_strides(shape()));
  os << ", dtype=" << dtype_name(dtype());
  if (!device().is_cpu()) os << ", device=" << device().str();
  if (requires_grad()) os << ", requires_grad=true";
  os << ")";
  return os.str();
}

}  // namespace linea
