// Reading and writing at integer positions. Each backward is the adjoint scatter/gather:
// index_select <-> index_add, gather <-> scatter_add. Indices carry no gradient.
#include "autograd/ops/common.h"

namespace linea {

using namespace ops_detail;

namespace {

// The adjoint kernel of a read at integer positions: it adds gy back at the positions read.
using AddBack = void (Backend::*)(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) const;

// Records y, read from x at `index` along dim d: backward starts from zeros shaped like x and
// adds gy back with add_back. Integer x takes no gradient.
Tensor record_read(const char* op, const Tensor& x, int64_t d, const Tensor& index, const Tensor& y, AddBack add_back) {
  if (!is_floating(x.dtype())) return y;
  return record(op, {x}, y, [x_shape = x.shape(), d, is = SavedTensor(index), add_back](const Tensor& gy) -> Grads {
    Tensor gx = zeros(x_shape, {gy.dtype(), gy.device()});
    (backend_for(gy).*add_back)(gx, d, is.get(), gy);
    return {gx};
  });
}

}  // namespace

// y = x at positions index along dim. backward: gy added back at those positions.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined(x, "index_select");
  check_index_tensor(index, x, "index_select");
  LINEA_CHECK(index.dim() == 1, "index_select", "index must be 1-D, got ", index.describe());
  LINEA_CHECK(x.dim() >= 1, "index_select", "cannot index a 0-dim tensor");
  const int64_t d = normalize_dim(dim, x.dim(), "index_select");
  Shape shape = x.shape();
  shape[d] = index.numel();
  Tensor y = empty(shape, x.dtype(), x.device());
  backend_for(x).index_select(x, d, index, y);
  return record_read("index_select", x, d, index, y, &Backend::index_add);
}

// y[i][j] = x[i][index[i][j]] (dim 1 shown). backward: scatter_add of gy.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_index_tensor(index, x, "gather");
  const int64_t d = dim_along(x, dim, "gather");
  LINEA_CHECK(index.dim() == x.dim(), "gather", "index ", index.describe(), " must have as many dims as ", x.describe());
  for (int64_t k = 0; k < x.dim(); ++k)
    LINEA_CHECK(k == d || index.size(k) <= x.size(k), "gather", "index ", index.describe(), " is larger than ",
                x.describe(), " in dim ", k);
  Tensor y = empty(index.shape(), x.dtype(), x.device());
  backend_for(x).gather(x, d, index, y);
  return record_read("gather", x, d, index, y, &Backend::scatter_add);
}

// y = x, then y[i][index[i][j]] += src[i][j]. backward: gx = gy, gsrc = gather(gy).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_compatible(x, src, "scatter_add");
  check_index_tensor(index, x, "scatter_add");
  const int64_t d = dim_along(x, dim, "scatter_add");
  LINEA_CHECK(index.shape() == src.shape(), "scatter_add", "index ", index.describe(), " and src ", src.describe(),
              " must have one shape");
  LINEA_CHECK(index.dim() == x.dim(), "scatter_add", "index ", index.describe(), " must have as many dims as ",
              x.describe());
  for (int64_t k = 0; k < x.dim(); ++k)
    LINEA_CHECK(k == d || index.size(k) <= x.size(k), "scatter_add", "index ", index.describe(), " is larger than ",
                x.describe(), " in dim ", k);
  Tensor y = copy_to(x, x.device());
  backend_for(x).scatter_add(y, d, index, src);
  return record("scatter_add", {x, src}, y, [d, is = SavedTensor(index)](const Tensor& gy) -> Grads {
    return {gy, gather(gy, d, is.get())};
  });
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  check_floating(weight, "embedding");
  check_index_tensor(ids, weight, "embedding");
  LINEA_CHECK(weight.dim() == 2, "embedding", "weight must be (vocab, dim), got ", weight.describe());
  Shape shape = ids.shape();
  shape.push_back(weight.size(1));
  const Tensor rows = rethrow_as("embedding", "ids " + ids.describe() + " for weight " + weight.describe(),
                                 [&] { return index_select(weight, 0, reshape(ids, {ids.numel()})); });
  return reshape(rows, shape);
}

}  // namespace linea
