#include "nn/layers/stacked_projection.h"

#include "autograd/grad_mode.h"
#include "nn/layers/fused_product.h"
#include "nn/precision.h"
#include "tensor/error.h"

namespace linea::nn {

namespace {

// The tensors a stack reads, in order: every weight, then every bias it adds.
std::vector<Tensor> sources_of(const std::vector<StackedProjection::Part>& parts) {
  std::vector<Tensor> sources;
  for (const auto& p : parts) sources.push_back(p.linear->weight);
  for (const auto& p : parts)
    if (p.with_bias && p.linear->bias.defined()) sources.push_back(p.linear->bias);
  return sources;
}

std::vector<Tensor> weights_of(const std::vector<StackedProjection::Part>& parts) {
  std::vector<Tensor> weights;
  for (const auto& p : parts) weights.push_back(p.linear->weight);
  return weights;
}

// The biases the stack adds, one per part in order (zeros for a part that adds none), or undefined
// when no part adds one.
Tensor stacked_bias(const std::vector<StackedProjection::Part>& parts) {
  bool any_bias = false;
  for (const auto& p : parts) any_bias = any_bias || (p.with_bias && p.linear->bias.defined());
  if (!any_bias) return Tensor();
  std::vector<Tensor> biases;
  for (const auto& p : parts) {
    const Tensor& w = p.linear->weight;
    biases.push_back(p.with_bias && p.linear->bias.defined() ? p.linear->bias
                                                            : zeros({w.size(0)}, {w.dtype(), w.device()}));
  }
  return cat(biases, 0);
}

// The parts' products through autograd as one: their weights (and biases) concatenated, one
// product, and its result split into views, one per part. The weights' gradients come back
// through cat, each a slice of the one product's.
std::vector<Tensor> product_then_split(const std::vector<StackedProjection::Part>& parts, const Tensor& input) {
  std::vector<int64_t> widths;
  for (const auto& p : parts) widths.push_back(p.linear->out_features());
  Tensor all = linear_product(input, cat(weights_of(parts), 0));
  if (const Tensor bias = stacked_bias(parts); bias.defined()) all = all + bias;
  return split(all, widths, -1);
}

}  // namespace

bool StackedProjection::cache_matches(const std::vector<Part>& parts) const {
  const std::vector<Tensor> now = sources_of(parts);
  if (!weight_.defined() || now.size() != sources_.size()) return false;
  for (size_t i = 0; i < now.size(); ++i)
    if (!now[i].is_same(sources_[i]) || now[i].version() != versions_[i]) return false;
  return true;
}

void StackedProjection::rebuild(const std::vector<Part>& parts) {
  const std::vector<Tensor> weights = weights_of(parts);
  weight_ = weights.size() == 1 ? weights[0] : cat(weights, 0);
  bias_ = stacked_bias(parts);
  sources_ = sources_of(parts);
  versions_.clear();
  for (const Tensor& t : sources_) versions_.push_back(t.version());
}

std::vector<Tensor> StackedProjection::forward(const std::vector<Part>& parts, const Tensor& x, const Norm* input_norm) {
  LINEA_CHECK(!parts.empty(), "StackedProjection", "needs at least one part");
  bool any_lora = false;
  for (const auto& p : parts) {
    LINEA_CHECK(p.linear->in_features() == parts[0].linear->in_features(), "StackedProjection",
                "parts must take one input width, got ", p.linear->in_features(), " and ",
                parts[0].linear->in_features());
    any_lora = any_lora || p.linear->lora;
  }
  std::vector<Tensor> out;
  if (any_lora || !fuses_products(x)) {
    const Tensor input = input_norm ? input_norm->forward(x) : x;
    if (parts.size() > 1 && !any_lora) return product_then_split(parts, input);
    for (const auto& p : parts)
      out.push_back(p.with_bias ? p.linear->forward(input) : p.linear->forward_without_bias(input));
    return out;
  }
  if (!cache_matches(parts)) rebuild(parts);
  const Tensor all = fused_product(weight_, bias_, x, {.input_norm = input_norm});
  int64_t at = 0;
  for (const auto& p : parts) {
    const int64_t width = p.linear->out_features();
    out.push_back(narrow(all, -1, at, width));
    at += width;
  }
  return out;
}

}  // namespace linea::nn
