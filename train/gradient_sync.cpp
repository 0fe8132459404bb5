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

// The elements [begin, begin + count) of a 1-D tensor.
Tensor range_of(const Tensor& flat, int64_t begin, int64_t count) {
  return make_view(flat, {count}, {1}, flat.offset() + begin);
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
  std::vector<std::vector<size_t>> plan = plan_buckets(bytes, bucket_bytes);
  if (plan.empty()) plan.emplace_back();  // no parameter: one bucket still carries the shared numbers
  for (std::vector<size_t>& members : plan) {
    Bucket b;
    for (size_t i : members) {
      bucket_of_[i] = buckets_.size();
      b.offsets.push_back(b.gradient_elements);
      b.gradient_elements += params_[i].numel();
    }
    b.params = std::move(members);
    buckets_.push_back(std::move(b));
  }
  const DType dtype = params_.empty() ? kFloat32 : params_.front().dtype();
  for (Bucket& b : buckets_) {
    const int64_t shared = &b == &buckets_.back() ? 1 : 0;  // the stop flag, until share() adds losses
    b.flat = empty({b.gradient_elements + shared}, dtype, comm_.device());
  }
}

void GradientSync::share(const std::vector<Tensor>& losses, bool stop) {
  LINEA_CHECK(next_to_start_ < buckets_.size(), "GradientSync::share",
              "the last bucket has started already: share the step's numbers before its last backward");
  for (const Tensor& loss : losses)
    LINEA_CHECK(loss.defined() && loss.numel() == 1 && loss.device() == comm_.device(), "GradientSync::share",
                "a loss must be one number on ", comm_.device().str(), ", got ",
                loss.defined() ? loss.describe() : std::string("an undefined tensor"));
  Bucket& last = buckets_.back();
  const int64_t size = last.gradient_elements + static_cast<int64_t>(losses.size()) + 1;
  if (last.flat.numel() != size) last.flat = empty({size}, last.flat.dtype(), comm_.device());
  losses_ = losses;
  stop_ = stop;
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

Tensor GradientSync::shared_numbers() const {
  const Bucket& last = buckets_.back();
  return range_of(last.flat, last.gradient_elements, last.flat.numel() - last.gradient_elements);
}

void GradientSync::start(Bucket& b) {
  NoGradGuard no_grad;
  for (size_t k = 0; k < b.params.size(); ++k) {
    const Tensor& p = params_[b.params[k]];
    Tensor slice = slice_for(b.flat, p, b.offsets[k]);
    const Tensor g = p.grad();
    if (!g.defined()) {
      fill_(slice, 0.0);
      continue;
    }
    // Already the slice when the gradients were not dropped since the last step (backward then
    // added into the view).
    if (g.raw_data() != slice.raw_data()) copy_into(slice, g);
    p.set_grad(slice);
  }
  if (&b == &buckets_.back()) {
    Tensor shared = shared_numbers();
    for (size_t i = 0; i < losses_.size(); ++i) copy_into(range_of(shared, static_cast<int64_t>(i), 1), losses_[i]);
    Tensor stop = range_of(shared, static_cast<int64_t>(losses_.size()), 1);
    fill_(stop, stop_ ? 1.0 : 0.0);
    losses_.clear();  // queued: the tensors need not live on
  }
  comm_.start_side_all_reduce(b.flat, dist::Reduction::Mean);
}

void GradientSync::finish() {
  while (next_to_start_ < buckets_.size()) start(buckets_[next_to_start_++]);
  comm_.wait_side_reductions();
  for (Bucket& b : buckets_) {
    b.flat.bump_version();  // the gradients, views of it, now hold the means
    b.ready = 0;
  }
  next_to_start_ = 0;
  stop_ = false;
}

Agreement GradientSync::agreement() {
  const std::vector<double> shared = to(copy_to(shared_numbers(), Device::cpu()), kFloat64).to_vector<double>();
  comm_.check_healthy();  // a peer that died leaves garbage behind: believe no number before asking
  Agreement a;
  a.losses.assign(shared.begin(), shared.end() - 1);
  a.stop = shared.back() > 0;
  return a;
}

}  // namespace linea::train
