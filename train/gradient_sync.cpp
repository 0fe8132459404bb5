#include "train/gradient_sync.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "tensor/creation.h"
#include "tensor/shape.h"
#include "tensor/transfer.h"

namespace linea::train {

std::vector<std::vector<size_t>> plan_buckets(const std::vector<int64_t>& param_bytes, int64_t cap_bytes) {
  LINEA_CHECK(cap_bytes > 0, "plan_buckets", "the bucket size must be > 0 bytes, got ", cap_bytes);
  std::vector<std::vector<size_t>> buckets;
  int64_t filled = 0;
  for (size_t i = param_bytes.size(); i-- > 0;) {
    if (buckets.empty() || (filled > 0 && filled + param_bytes[i] > cap_bytes)) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(i);
    filled += param_bytes[i];
  }
  return buckets;
}

namespace {

// The slice of `flat` that holds the gradient of p, shaped like p.
Tensor slice_for(const Tensor& flat, const Tensor& p, int64_t offset) {
  return make_view(flat, p.shape(), contiguous_strides(p.shape()), flat.offset() + offset);
}

}  // namespace

GradientSync::GradientSync(dist::Communicator& comm, std::vector<Tensor> params, int64_t bucket_bytes)
    : comm_(comm), params_(std::move(params)), bucket_of_(params_.size()) {
  std::vector<int64_t> bytes;
  for (const Tensor& p : params_) {
    LINEA_CHECK(p.device() == comm_.device(), "GradientSync", "a parameter ", p.describe(), " is not on this rank's ",
                comm_.device().str());
    LINEA_CHECK(p.dtype() == params_.front().dtype() && is_floating(p.dtype()) && p.dtype() != kBFloat16,
                "GradientSync", "the parameters must share one float32 or float64 dtype, got ",
                dtype_name(params_.front().dtype()), " and ", dtype_name(p.dtype()));
    bytes.push_back(p.numel() * static_cast<int64_t>(dtype_size(p.dtype())));
  }
  for (std::vector<size_t>& members : plan_buckets(bytes, bucket_bytes)) {
    Bucket b;
    int64_t elements = 0;
    for (size_t i : members) {
      bucket_of_[i] = buckets_.size();
      b.offsets.push_back(elements);
      elements += params_[i].numel();
    }
    b.params = std::move(members);
    b.flat = empty({elements}, params_.front().dtype(), comm_.device());
    buckets_.push_back(std::move(b));
  }
}

GradAccumulatedHook GradientSync::hook() {
  return [this](const Tensor& leaf) { on_grad_accumulated(leaf); };
}

void GradientSync::on_grad_accumulated(const Tensor& leaf) {
  // A few dozen parameters: a linear search costs less than hashing would explain.
  const auto it = std::find_if(params_.begin(), params_.end(), [&](const Tensor& p) { return p.is_same(leaf); });
  if (it == params_.end()) return;  // a leaf that does not train here (frozen by LoRA, say)
  Bucket& b = buckets_[bucket_of_[it - params_.begin()]];
  ++b.ready;
  start_filled_buckets();
}

void GradientSync::start_filled_buckets() {
  while (next_to_start_ < buckets_.size() && buckets_[next_to_start_].ready == buckets_[next_to_start_].params.size())
    start(buckets_[next_to_start_++]);
}

void GradientSync::start(Bucket& b) {
  NoGradGuard no_grad;
  for (size_t k = 0; k < b.params.size(); ++k) {
    const Tensor& p = params_[b.params[k]];
    Tensor slice = slice_for(b.flat, p, b.offsets[k]);
    const Tensor g = p.grad();
    if (g.defined()) copy_into(slice, g);
    else fill_(slice, 0.0);
  }
  comm_.start_side_all_reduce_sum(b.flat);
}

void GradientSync::finish() {
  NoGradGuard no_grad;
  while (next_to_start_ < buckets_.size()) start(buckets_[next_to_start_++]);
  comm_.wait_side_reductions();
  const double inverse = 1.0 / comm_.size();
  for (Bucket& b : buckets_) {
    if (comm_.size() > 1) mul_(b.flat, inverse);
    for (size_t k = 0; k < b.params.size(); ++k) {
      const Tensor& p = params_[b.params[k]];
      Tensor g = p.grad();
      if (!g.defined()) continue;
      copy_into(g, slice_for(b.flat, p, b.offsets[k]));
      g.bump_version();
    }
    b.ready = 0;
  }
  next_to_start_ = 0;
}

}  // namespace linea::train
