#include "tensor/view.h"

#include <algorithm>

#include "tensor/transfer.h"

namespace linea::views {

Shape infer_size(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1, infer_at = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      LINEA_CHECK(infer_at < 0, op, "only one size can be -1 in ", shape_str(shape));
      infer_at = static_cast<int64_t>(d);
    } else {
      LINEA_CHECK(shape[d] >= 0, op, "invalid size in ", shape_str(shape));
      known *= shape[d];
    }
  }
  if (infer_at >= 0) {
    LINEA_CHECK(known != 0 && numel % known == 0, op, "shape ", shape_str(shape), " is invalid for ", numel,
                " elements");
    out[infer_at] = numel / known;
  }
  LINEA_CHECK(numel_of(out) == numel, op, "shape ", shape_str(shape), " is invalid for ", numel, " elements");
  return out;
}

std::optional<Shape> strides_for_view(const Tensor& x, const Shape& shape) {
  const Shape& old_shape = x.shape();
  const Shape& old_strides = x.strides();
  Shape strides(shape.size());
  if (x.numel() == 0) return contiguous_strides(shape);
  // Walk old dims from the back in chunks that are contiguous among themselves; each chunk must
  // map onto a run of new dims with the same number of elements.
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    const bool chunk_ends = d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride);
    if (chunk_ends) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) {  // leftover new dims must all be 1
    for (; view_d >= 0; --view_d) {
      if (shape[view_d] != 1) return std::nullopt;
      strides[view_d] = 1;
    }
  }
  return strides;
}

Tensor view(const Tensor& x, const Shape& shape_in) {
  const Shape shape = infer_size(shape_in, x.numel(), "view");
  const std::optional<Shape> strides = strides_for_view(x, shape);
  LINEA_CHECK(strides.has_value(), "view", "cannot view ", x.describe(), " with strides ",
              shape_str(x.strides()), " as shape ", shape_str(shape),
              " without copying; use reshape() or contiguous() first");
  return make_view(x, shape, *strides, x.offset());
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  LINEA_CHECK(static_cast<int64_t>(dims.size()) == x.dim(), "permute", "got ", dims.size(),
              " dims for ", x.describe());
  Shape shape, strides;
  std::vector<bool> seen(x.dim(), false);
  for (int64_t d : dims) {
    const int64_t n = normalize_dim(d, x.dim(), "permute");
    LINEA_CHECK(!seen[n], "permute", "dim ", d, " repeats in the permutation");
    seen[n] = true;
    shape.push_back(x.shape()[n]);
    strides.push_back(x.strides()[n]);
  }
  return make_view(x, shape, strides, x.offset());
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  LINEA_CHECK(x.dim() > 0, "slice", "cannot slice a 0-dim tensor");
  dim = normalize_dim(dim, x.dim(), "slice");
  LINEA_CHECK(step >= 1, "slice", "step must be positive, got ", step);
  const int64_t size = x.shape()[dim];
  auto clamp_index = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  start = clamp_index(start);
  end = std::max(clamp_index(end), start);
  Shape shape = x.shape(), strides = x.strides();
  shape[dim] = (end - start + step - 1) / step;
  strides[dim] *= step;
  const int64_t offset = x.offset() + (shape[dim] > 0 ? start * x.strides()[dim] : 0);
  return make_view(x, shape, strides, offset);
}

Tensor expand(const Tensor& x, const Shape& shape_in) {
  LINEA_CHECK(shape_in.size() >= x.shape().size(), "expand", "cannot expand ", x.describe(), " to ",
              shape_str(shape_in), ": fewer dims");
  Shape shape = shape_in;
  const size_t lead = shape.size() - x.shape().size();
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] == -1) {
      LINEA_CHECK(d >= lead, "expand", "-1 is not allowed for a new leading dim in ", shape_str(shape_in));
      shape[d] = x.shape()[d - lead];
    }
  return broadcast_view(x, shape, "expand");
}

Tensor squeeze(const Tensor& x, const std::vector<int64_t>& dims) {
  Shape shape, strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (std::find(dims.begin(), dims.end(), d) != dims.end() && x.shape()[d] == 1) continue;
    shape.push_back(x.shape()[d]);
    strides.push_back(x.strides()[d]);
  }
  return make_view(x, shape, strides, x.offset());
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  dim = normalize_dim(dim, x.dim() + 1, "unsqueeze");
  Shape shape = x.shape(), strides = x.strides();
  const int64_t stride = dim < x.dim() ? x.strides()[dim] * x.shape()[dim] : 1;
  shape.insert(shape.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  return make_view(x, shape, strides, x.offset());
}

}  // namespace linea::views
