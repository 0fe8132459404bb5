#include "nn/init.h"

#include <cmath>

#include "tensor/transfer.h"

namespace linea::nn::init {

namespace {
// Draws on the CPU in the tensor's dtype and copies in: the numbers do not depend on the device.
void assign(Tensor& t, const Tensor& values) {
  NoGradGuard no_grad;
  copy_into(t, values);
}
}  // namespace

void normal_(Tensor& t, double mean, double stddev, Generator& gen) {
  assign(t, randn(t.shape(), t.dtype(), &gen) * stddev + mean);
}

void uniform_(Tensor& t, double low, double high, Generator& gen) {
  assign(t, uniform(t.shape(), low, high, t.dtype(), &gen));
}

void zeros_(Tensor& t) { constant_(t, 0.0); }
void ones_(Tensor& t) { constant_(t, 1.0); }
void constant_(Tensor& t, double value) { assign(t, full({}, value, t.dtype())); }

std::pair<int64_t, int64_t> fans(const Tensor& t) {
  LINEA_CHECK(t.dim() >= 1, "init", "cannot compute fans of a 0-dim tensor");
  if (t.dim() == 1) return {t.size(0), t.size(0)};
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

void xavier_uniform_(Tensor& t, Generator& gen, double gain) {
  const auto [fan_in, fan_out] = fans(t);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  uniform_(t, -bound, bound, gen);
}

void xavier_normal_(Tensor& t, Generator& gen, double gain) {
  const auto [fan_in, fan_out] = fans(t);
  normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), gen);
}

void lecun_normal_(Tensor& t, Generator& gen) { normal_(t, 0.0, 1.0 / std::sqrt(static_cast<double>(fans(t).first)), gen); }

void lecun_uniform_(Tensor& t, Generator& gen) {
  const double bound = std::sqrt(3.0 / static_cast<double>(fans(t).first));
  uniform_(t, -bound, bound, gen);
}

void gate_init_(Tensor& t, Generator& gen) { xavier_uniform_(t, gen, std::pow(2.0, -2.5)); }

}  // namespace linea::nn::init
